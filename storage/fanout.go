package storage

import (
	"context"

	"github.com/webhookd/webhookd/engine"
)

// FanOut returns none: AppendEvent stores an event's deliveries with it.
func (db *DB) FanOut(ctx context.Context, max int) ([]engine.FannedOut, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []engine.FannedOut{}, nil
}
