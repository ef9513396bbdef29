package storage

import (
	"bytes"
	"sync"

	"github.com/webhookd/webhookd/engine"
)

// typeCache keeps the decoded form of the event type records that
// ingest hands to engine.NewEvent.CheckType, each beside the stored
// bytes it was decoded from. As endpointCache, a hit needs the record
// read in the ingest's own transaction to be byte for byte the cached
// one, so it is never stale: a put of the type (a new schema, a new
// status) has other bytes and is decoded again. It saves every ingest of
// a type with a schema the JSON decode of the schema (twice: the read
// check and the write). Safe for concurrent use.
type typeCache struct {
	mu sync.Mutex
	m  map[string]cachedType // by type name
}

type cachedType struct {
	raw []byte // the record as stored
	et  engine.EventType
}

// ingestType returns the catalogue entry of type name, whose record as
// stored now is raw (bbolt's memory: valid while its transaction is),
// for CheckType: a record with neither a status nor a schema is an
// active type without one, and is not decoded (most types: their
// ingests cost nothing more than a look at the record); another is
// decoded once per change. The entry's Schema and Example are the
// cache's and must not be changed.
func (c *typeCache) ingestType(name string, raw []byte) (engine.EventType, error) {
	// The cache first: comparing a record with a schema to the cached
	// copy is cheaper than searching it for the two fields (which
	// cost a tenth of what a typical schema's validation does).
	c.mu.Lock()
	e, ok := c.m[name]
	c.mu.Unlock()
	if ok && bytes.Equal(e.raw, raw) {
		return e.et, nil
	}
	if !bytes.Contains(raw, eventTypeStatusField) && !bytes.Contains(raw, eventTypeSchemaField) {
		return engine.EventType{Name: name}, nil
	}
	raw = bytes.Clone(raw)
	et, err := decodeEventType(raw)
	if err != nil {
		return engine.EventType{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedTypes {
		c.m = map[string]cachedType{}
	}
	c.m[name] = cachedType{raw: raw, et: et}
	return et, nil
}

// maxCachedTypes bounds typeCache; when it is full it starts over.
const maxCachedTypes = 4096
