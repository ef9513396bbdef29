package storage

import (
	"bytes"
	"slices"
	"sync"

	"github.com/webhookd/webhookd/engine"
)

// maxCachedEndpoints bounds endpointCache; when it is full it starts over.
const maxCachedEndpoints = 4096

// endpointCache keeps the decoded form of the endpoint records that
// attempts read (secrets and custom header values opened) or ingest's
// fan-out read (secrets as stored; a cache of its own), each beside the stored bytes it was decoded
// from. A hit needs the record read in the attempt's own transaction to be
// byte for byte the cached one, so the cache is never stale and needs no
// invalidation: a changed endpoint (a new secret, a health update) has
// other bytes and is decoded again. It saves every attempt a JSON decode
// of its endpoint and, with encryption at rest, an AES-GCM open of each
// secret and header value, and every ingest a decode of each endpoint of
// its tenant. The opened values live here, in memory only. Safe
// for concurrent use.
type endpointCache struct {
	mu sync.Mutex
	m  map[string]cachedEndpoint // by endpoint key (endpointKey)
}

type cachedEndpoint struct {
	raw []byte // the record as stored
	ep  engine.Endpoint
}

// get returns the endpoint decoded from raw, the record now stored under
// key, if it is cached. The result is the caller's to change.
func (c *endpointCache) get(key, raw []byte) (engine.Endpoint, bool) {
	ep, ok := c.peek(key, raw)
	if ok {
		ep.EventTypes = slices.Clone(ep.EventTypes)
		ep.Channels = slices.Clone(ep.Channels)
		ep.Secrets = slices.Clone(ep.Secrets)
		ep.SecretReveals = slices.Clone(ep.SecretReveals)
		ep.Headers = slices.Clone(ep.Headers)
	}
	return ep, ok
}

// peek is get for a caller that only reads the endpoint: its EventTypes,
// Channels, Secrets, SecretReveals and Headers are the cache's, not
// copies, and must not be changed.
func (c *endpointCache) peek(key, raw []byte) (engine.Endpoint, bool) {
	c.mu.Lock()
	e, ok := c.m[string(key)]
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		return engine.Endpoint{}, false
	}
	return e.ep, true
}

// put caches ep, decoded (secrets opened) from raw, stored under key. raw
// must not be bbolt's memory: it is kept.
func (c *endpointCache) put(key, raw []byte, ep engine.Endpoint) {
	ep.EventTypes = slices.Clone(ep.EventTypes)
	ep.Channels = slices.Clone(ep.Channels)
	ep.Secrets = slices.Clone(ep.Secrets)
	ep.SecretReveals = slices.Clone(ep.SecretReveals)
	ep.Headers = slices.Clone(ep.Headers)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedEndpoints {
		c.m = make(map[string]cachedEndpoint)
	}
	c.m[string(key)] = cachedEndpoint{raw: raw, ep: ep}
}
