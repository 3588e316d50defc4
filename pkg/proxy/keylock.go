package proxy

import (
	"context"
	"sync"
)

// keyLocks serializes work per connection id while different ids proceed in
// parallel. Entries exist only while someone holds or waits for them.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{} // a token: holding it means holding the lock
	refs int
}

// lock takes the lock of id, or gives up when ctx is done.
func (k *keyLocks) lock(ctx context.Context, id string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[id]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.m[id] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.ch <- struct{}{}:
		return func() {
			<-l.ch
			k.put(id, l)
		}, nil
	case <-ctx.Done():
		k.put(id, l)
		return nil, ctx.Err()
	}
}

func (k *keyLocks) put(id string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(k.m, id)
	}
}
