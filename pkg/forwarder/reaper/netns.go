package reaper

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Inode is the inode of the network namespace that a kernel mechanism's
// file:// URL names; 0 when it names none (another scheme, a file that is
// not a namespace, a path that is gone).
func Inode(rawURL string) uint64 {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "file" {
		return 0
	}
	var st, own unix.Stat_t
	if unix.Stat(u.Path, &st) != nil || unix.Stat("/proc/self/ns/net", &own) != nil || st.Dev != own.Dev {
		return 0
	}
	return st.Ino
}

// LiveNetNS returns the inodes of the network namespaces that something
// other than a file descriptor keeps alive: a process that /proc shows
// lives in it, or a mount of this process's mount namespace holds it. A
// process whose namespace cannot be read (it exited, or is not ours to
// read) counts for nothing.
func LiveNetNS() (map[uint64]bool, error) { return liveIn("/proc") }

func liveIn(proc string) (map[uint64]bool, error) {
	dir, err := os.Open(proc)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", proc, err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", proc, err)
	}
	live := make(map[uint64]bool)
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		if link, err := os.Readlink(filepath.Join(proc, name, "ns", "net")); err == nil {
			if ino, ok := parseNetNS(link); ok {
				live[ino] = true
			}
		}
	}
	mounts, err := os.ReadFile(filepath.Join(proc, "self", "mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if ino, ok := mountedNetNS(line); ok {
			live[ino] = true
		}
	}
	return live, nil
}

// mountedNetNS reads a mountinfo line (id, parent, device, root, mount
// point, options, optional fields, "-", type, source, options) of a
// namespace mount, whose root is the namespace ("net:[4026532000]").
func mountedNetNS(line string) (uint64, bool) {
	fields := strings.Fields(line)
	sep := slices.Index(fields, "-")
	if sep < 4 || sep+1 >= len(fields) || fields[sep+1] != "nsfs" {
		return 0, false
	}
	return parseNetNS(fields[3])
}

// parseNetNS reads a network namespace's name as its /proc link shows it:
// "net:[4026531840]".
func parseNetNS(s string) (uint64, bool) {
	num, ok := strings.CutPrefix(s, "net:[")
	if !ok {
		return 0, false
	}
	if num, ok = strings.CutSuffix(num, "]"); !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(num, 10, 64)
	return ino, err == nil
}
