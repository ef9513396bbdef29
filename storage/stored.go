package storage

import (
	"errors"
	"fmt"
	"slices"

	"github.com/webhookd/webhookd/engine"
)

// storedDelivery returns d as decodeDelivery reads it back from its
// encoding, without decoding it: the binary format keeps every string
// byte for byte, so the copy differs from d only in its times (UTC, no
// monotonic reading). It makes the same checks as decodeDelivery. Writes
// call it inside the commit loop. The attempts' ResponseHeaders are
// d's slices: nothing changes a header kept in place.
func storedDelivery(d engine.Delivery) (engine.Delivery, error) {
	if d.ID == "" || d.TenantID == "" {
		return engine.Delivery{}, errors.New("decode delivery: no id or tenant")
	}
	if !storedState(d.State) {
		return engine.Delivery{}, fmt.Errorf("decode delivery %s: unknown state %q", d.ID, d.State)
	}
	d.CycleStart, d.NextAttemptAt, d.DeadAt = utc(d.CycleStart), utc(d.NextAttemptAt), utc(d.DeadAt)
	d.Created, d.Updated, d.DeliverAt = utc(d.Created), utc(d.Updated), utc(d.DeliverAt)
	if d.Attempts != nil {
		d.Attempts = slices.Clone(d.Attempts)
		for i := range d.Attempts {
			d.Attempts[i].Start = utc(d.Attempts[i].Start)
		}
	}
	if d.Replays != nil {
		d.Replays = slices.Clone(d.Replays)
		for i := range d.Replays {
			d.Replays[i].At = utc(d.Replays[i].At)
		}
	}
	if d.Skips != nil {
		d.Skips = slices.Clone(d.Skips)
		for i := range d.Skips {
			d.Skips[i].At = utc(d.Skips[i].At)
		}
	}
	if d.State != engine.StateWaiting {
		d.WaitingBehind = "" // getDelivery fills it in for a waiting one only
	}
	d.Channels = storedChannels(d.Channels)
	if d.Backfill != nil {
		d.Backfill = &engine.Backfill{At: utc(d.Backfill.At), By: d.Backfill.By}
	}
	return d, nil
}

// storedChannels returns channels as a record's decoder reads them back:
// a copy, nil when there are none.
func storedChannels(channels []string) []string {
	if len(channels) == 0 {
		return nil
	}
	return slices.Clone(channels)
}

// storedEvent returns ev as decodeEvent reads it back from v, its encoding
// (encodeEvent(ev)), without decoding v. Ingest calls it inside the commit
// loop.
func storedEvent(ev engine.Event, v []byte) (engine.Event, error) {
	if ev.ID == "" || ev.TenantID == "" {
		return engine.Event{}, errors.New("decode event: no id or tenant")
	}
	body := slices.Clone(v[len(v)-len(ev.Body):])
	return engine.Event{
		ID: ev.ID, TenantID: ev.TenantID, Type: ev.Type, Created: utc(ev.Created), APIVersion: ev.APIVersion,
		Sequence: ev.Sequence, OrderingKey: ev.OrderingKey, Test: ev.Test, Channels: storedChannels(ev.Channels), DeliverAt: utc(ev.DeliverAt),
		IngestTrace: ev.IngestTrace, Body: body,
	}, nil
}
