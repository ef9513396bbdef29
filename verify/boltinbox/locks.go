package boltinbox

import (
	"context"
	"sync"
)

// keyLocks is a set of per-key locks whose waits honour a context. A key's
// entry lives while someone holds or waits for it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	sem  chan struct{} // holds one token while the key is locked
	refs int           // holders and waiters; guarded by keyLocks.mu
}

// lock takes the lock of key, waiting for the current holder to unlock or
// for ctx to end. It returns the function that unlocks.
func (l *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*keyLock)
	}
	k := l.m[key]
	if k == nil {
		k = &keyLock{sem: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()

	select {
	case k.sem <- struct{}{}:
		return func() {
			<-k.sem
			l.release(key, k)
		}, nil
	case <-ctx.Done():
		l.release(key, k)
		return nil, ctx.Err()
	}
}

func (l *keyLocks) release(key string, k *keyLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k.refs--
	if k.refs == 0 {
		delete(l.m, key)
	}
}

// len reports how many keys are held or waited for (for tests).
func (l *keyLocks) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
