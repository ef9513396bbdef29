package boltinbox

import (
	"bytes"
	"testing"
	"time"

	"github.com/webhookd/webhookd/verify"
)

func FuzzDecodeTaskRecord(f *testing.F) {
	at := time.Unix(1_700_000_000, 5)
	f.Add(taskRecord{state: verify.TaskPending, created: at, updated: at, due: at}.encode())
	f.Add(taskRecord{state: verify.TaskFailed, attempts: 7, created: at, updated: at, payload: []byte("pay"), lastError: "boom"}.encode())
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeTaskRecord(b)
		if err != nil {
			return
		}
		if got := r.encode(); !bytes.Equal(got, b) {
			t.Fatalf("encode(decode(b)) = %x, want %x", got, b)
		}
	})
}

func FuzzDecodeEventRecord(f *testing.F) {
	f.Add(eventRecord{receivedAt: time.Unix(1_700_000_000, 5)}.encode())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeEventRecord(b)
		if err != nil {
			return
		}
		if got := r.encode(); !bytes.Equal(got, b) {
			t.Fatalf("encode(decode(b)) = %x, want %x", got, b)
		}
	})
}

func FuzzParseTaskKey(f *testing.F) {
	f.Add(appendTaskKey(nil, "acme", "evt_1", "email"))
	f.Add(appendTaskKey(nil, "", "", ""))
	f.Add([]byte{0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, k []byte) {
		sender, eventID, name, ok := parseTaskKey(k)
		if !ok {
			return
		}
		if got := appendTaskKey(nil, sender, eventID, name); !bytes.Equal(got, k) {
			t.Fatalf("appendTaskKey(parseTaskKey(k)) = %x, want %x", got, k)
		}
	})
}
