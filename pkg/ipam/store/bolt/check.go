package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// DamagedError says that a database file exists but cannot be used as it
// is: empty, truncated, not a bbolt file, or inconsistent. Nothing was
// changed in it.
type DamagedError struct {
	Path    string
	Problem string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("store %s is damaged (%s)", e.Path, e.Problem)
}

func damaged(path, format string, args ...any) error {
	return &DamagedError{Path: path, Problem: fmt.Sprintf(format, args...)}
}

// The on-disk layout of a bbolt file, as far as checkFile reads it. Every
// page starts with a 16-byte header: id uint64, flags uint16, count uint16,
// overflow uint32. Pages 0 and 1 are meta pages; the meta follows the
// header. Integers are in the host's byte order.
const (
	pageHeaderSize = 16
	elementSize    = 16 // both branch and leaf elements

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10

	leafFlagBucket = 0x01

	metaMagic     = 0xED0CDAED
	metaVersion   = 2
	metaSize      = 64 // checksum at 56 covers the 56 bytes before it
	noFreelist    = ^uint64(0)
	minPageSize   = 512
	maxPageSize   = 1 << 24
	bucketHdrSize = 16 // root page id, sequence
)

var ne = binary.NativeEndian

type meta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // high water mark: pages in use
	txid     uint64
}

// parseMeta decodes and validates the meta of a page read at b.
func parseMeta(b []byte) (meta, error) {
	if len(b) < pageHeaderSize+metaSize {
		return meta{}, errors.New("short")
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	if ne.Uint32(m[0:]) != metaMagic {
		return meta{}, errors.New("bad magic")
	}
	if v := ne.Uint32(m[4:]); v != metaVersion {
		return meta{}, fmt.Errorf("version %d", v)
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	if h.Sum64() != ne.Uint64(m[56:]) {
		return meta{}, errors.New("bad checksum")
	}
	return meta{
		pageSize: ne.Uint32(m[8:]), root: ne.Uint64(m[16:]), freelist: ne.Uint64(m[32:]),
		hwm: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:]),
	}, nil
}

// checkFile checks the file at path without mapping it into memory, so that
// no truncation or stray page can fault or panic: size and headers first,
// then every page reachable from the meta that bbolt would use, the way
// bbolt walks them when it opens a file without a stored freelist (its own
// walk reports problems by panicking in a goroutine of its own, which
// cannot be recovered). It returns a *DamagedError for what is wrong with
// the file, another error if it cannot be read.
func checkFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	size := info.Size()
	if size == 0 {
		return damaged(path, "empty file, 0 bytes: only a missing file is taken as a new store")
	}
	m, err := chooseMeta(f, size)
	if err != nil {
		return damaged(path, "%v", err)
	}
	if need := int64(m.hwm) * int64(m.pageSize); size < need {
		return damaged(path, "truncated: the file has %d bytes, its header says the database spans %d", size, need)
	}
	w := &walker{f: f, m: m, seen: map[uint64]bool{0: true, 1: true}}
	if err := w.freelist(); err != nil {
		return damaged(path, "%v", err)
	}
	if _, err := w.bucket(m.root, nil, nil); err != nil {
		return damaged(path, "%v", err)
	}
	return nil
}

// chooseMeta returns the meta bbolt would use: of the two, the valid one
// with the highest transaction id.
func chooseMeta(f io.ReaderAt, size int64) (meta, error) {
	buf := make([]byte, pageHeaderSize+metaSize)
	read := func(off int64) (meta, error) {
		if off+int64(len(buf)) > size {
			return meta{}, errors.New("short")
		}
		if _, err := f.ReadAt(buf, off); err != nil {
			return meta{}, err
		}
		if fl := ne.Uint16(buf[8:]); fl != flagMeta {
			return meta{}, fmt.Errorf("flags %#x", fl)
		}
		return parseMeta(buf)
	}
	m0, err0 := read(0)
	pageSize := m0.pageSize
	if err0 != nil {
		// Page 0 unreadable: find page 1 at the possible page sizes.
		for ps := int64(minPageSize); ps <= maxPageSize && pageSize == 0; ps *= 2 {
			if m1, err := read(ps); err == nil && int64(m1.pageSize) == ps {
				pageSize = m1.pageSize
			}
		}
	}
	if pageSize < minPageSize || pageSize > maxPageSize || pageSize&(pageSize-1) != 0 {
		return meta{}, fmt.Errorf("not a bbolt database, or its header pages are overwritten (page 0: %v)", err0)
	}
	m1, err1 := read(int64(pageSize))
	if err0 == nil && m0.pageSize != pageSize || err1 == nil && m1.pageSize != pageSize {
		return meta{}, errors.New("header pages disagree on the page size")
	}
	if size < 2*int64(pageSize) {
		return meta{}, fmt.Errorf("truncated: the file has %d bytes, less than its two header pages (%d)", size, 2*pageSize)
	}
	// A torn write leaves one meta invalid, which bbolt survives (it uses
	// the other), but not a page header overwritten with something else.
	for i, off := range []int64{0, int64(pageSize)} {
		hdr := make([]byte, pageHeaderSize)
		if _, err := f.ReadAt(hdr, off); err != nil {
			return meta{}, fmt.Errorf("header page %d: %w", i, err)
		}
		if id, fl := ne.Uint64(hdr), ne.Uint16(hdr[8:]); id != uint64(i) || fl != flagMeta {
			return meta{}, fmt.Errorf("header page %d is overwritten (id %d, type %#x)", i, id, fl)
		}
	}
	var best meta
	switch {
	case err0 == nil && (err1 != nil || m0.txid >= m1.txid):
		best = m0
	case err1 == nil:
		best = m1
	default:
		return meta{}, fmt.Errorf("both header pages are invalid (%v; %v)", err0, err1)
	}
	if best.hwm < 2 || best.root < 2 || best.root >= best.hwm {
		return meta{}, fmt.Errorf("header: root page %d outside the %d pages in use", best.root, best.hwm)
	}
	return best, nil
}

// walker reads pages with bounds checks and records every page it reaches.
type walker struct {
	f    io.ReaderAt
	m    meta
	seen map[uint64]bool
}

// page reads page id with its overflow pages, checking that it is one of
// want (flags) and reached once only.
func (w *walker) page(id uint64, want ...uint16) ([]byte, error) {
	if id < 2 || id >= w.m.hwm {
		return nil, fmt.Errorf("a reference to page %d, outside the %d pages in use", id, w.m.hwm)
	}
	ps := int64(w.m.pageSize)
	hdr := make([]byte, pageHeaderSize)
	if _, err := w.f.ReadAt(hdr, int64(id)*ps); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := ne.Uint64(hdr); got != id {
		return nil, fmt.Errorf("page %d identifies itself as page %d", id, got)
	}
	flags, overflow := ne.Uint16(hdr[8:]), uint64(ne.Uint32(hdr[12:]))
	ok := false
	for _, f := range want {
		ok = ok || flags == f
	}
	if !ok {
		return nil, fmt.Errorf("page %d has type %#x, not one expected there", id, flags)
	}
	if id+overflow >= w.m.hwm {
		return nil, fmt.Errorf("page %d overflows past the %d pages in use", id, w.m.hwm)
	}
	for i := id; i <= id+overflow; i++ {
		if w.seen[i] {
			return nil, fmt.Errorf("page %d is referenced twice", i)
		}
		w.seen[i] = true
	}
	b := make([]byte, int64(overflow+1)*ps)
	if _, err := w.f.ReadAt(b, int64(id)*ps); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return b, nil
}

// freelist checks a stored freelist (this store does not write one, but a
// file may come from elsewhere).
func (w *walker) freelist() error {
	if w.m.freelist == noFreelist {
		return nil
	}
	b, err := w.page(w.m.freelist, flagFreelist)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	n, off := uint64(ne.Uint16(b[10:])), uint64(pageHeaderSize)
	if n == 0xFFFF {
		n, off = ne.Uint64(b[off:]), off+8
	}
	if off+8*n > uint64(len(b)) {
		return fmt.Errorf("freelist page %d: %d entries do not fit", w.m.freelist, n)
	}
	for i := uint64(0); i < n; i++ {
		if id := ne.Uint64(b[off+8*i:]); id < 2 || id >= w.m.hwm {
			return fmt.Errorf("freelist page %d: free page %d outside the %d pages in use", w.m.freelist, id, w.m.hwm)
		}
	}
	return nil
}

// bucket walks the B+tree rooted at page id. Keys sort strictly within a
// page; every key of the subtree is at or above min and below max (nil: no
// bound), where min and max are the parent's separators. It returns the
// highest key of the subtree.
func (w *walker) bucket(id uint64, min, max []byte) ([]byte, error) {
	b, err := w.page(id, flagBranch, flagLeaf)
	if err != nil {
		return nil, err
	}
	count := int(ne.Uint16(b[10:]))
	if pageHeaderSize+count*elementSize > len(b) {
		return nil, fmt.Errorf("page %d: %d elements do not fit", id, count)
	}
	isLeaf := ne.Uint16(b[8:]) == flagLeaf
	keys := make([][]byte, count)
	children := make([]uint64, count)
	for i := range keys {
		e := pageHeaderSize + i*elementSize
		if isLeaf {
			flags, pos, ks, vs := ne.Uint32(b[e:]), ne.Uint32(b[e+4:]), ne.Uint32(b[e+8:]), ne.Uint32(b[e+12:])
			key, val, err := slices(b, e, pos, ks, vs)
			if err != nil {
				return nil, fmt.Errorf("page %d element %d: %w", id, i, err)
			}
			keys[i] = key
			if flags&leafFlagBucket != 0 {
				if len(val) < bucketHdrSize {
					return nil, fmt.Errorf("page %d element %d: short bucket header", id, i)
				}
				// 0: inline, its page follows the header in the value.
				children[i] = ne.Uint64(val)
				if children[i] == 0 && len(val) < bucketHdrSize+pageHeaderSize {
					return nil, fmt.Errorf("page %d element %d: short inline bucket", id, i)
				}
			}
		} else {
			key, _, err := slices(b, e, ne.Uint32(b[e:]), ne.Uint32(b[e+4:]), 0)
			if err != nil {
				return nil, fmt.Errorf("page %d element %d: %w", id, i, err)
			}
			keys[i], children[i] = key, ne.Uint64(b[e+8:])
		}
	}
	low := min // the highest key so far
	for i, key := range keys {
		if low != nil && (bytes.Compare(key, low) < 0 || i > 0 && bytes.Equal(key, low)) {
			return nil, fmt.Errorf("page %d: keys out of order at element %d", id, i)
		}
		if max != nil && bytes.Compare(key, max) >= 0 {
			return nil, fmt.Errorf("page %d: key %d beyond its parent's range", id, i)
		}
		low = key
		switch {
		case !isLeaf:
			next := max
			if i+1 < count {
				next = keys[i+1]
			}
			if low, err = w.bucket(children[i], key, next); err != nil {
				return nil, err
			}
		case children[i] != 0:
			if _, err := w.bucket(children[i], nil, nil); err != nil {
				return nil, err
			}
		}
	}
	return low, nil
}

// slices returns the key and value of the element at offset e of page b.
func slices(b []byte, e int, pos, ks, vs uint32) ([]byte, []byte, error) {
	start := uint64(e) + uint64(pos)
	end := start + uint64(ks) + uint64(vs)
	if end > uint64(len(b)) {
		return nil, nil, errors.New("data past the end of the page")
	}
	return b[start : start+uint64(ks)], b[start+uint64(ks) : end], nil
}
