package engine

import "time"

// Dispatcher delivers due deliveries. (skeleton; being written)
type Dispatcher struct{}

// Enqueue schedules delivery id of endpoint for due (now or earlier: at once).
func (d *Dispatcher) Enqueue(id, endpointID string, due time.Time) {}

// InFlight reports whether an attempt of delivery id is running now.
func (d *Dispatcher) InFlight(id string) bool { return false }
