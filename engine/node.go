package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// NodeOptions configure a Node. A nil part is left out.
type NodeOptions struct {
	Service    ServiceOptions
	Dispatcher DispatcherOptions // its OnAlert is the Node's own
	// Alerts, when set, sends webhookd's own events to the operator's
	// endpoint (see EnsureOperatorEndpoint and AlertSink).
	Alerts *AlertOptions
	// Janitor, when set, prunes what retention no longer keeps and purges
	// deleted tenants (the store's Maintenance). The deliveries its pruning makes a line's head go to the Dispatcher
	// (Enqueue), then to its own Promoted, if any.
	Janitor *JanitorOptions
	Logger  *slog.Logger // nil: discard
}

// AlertOptions say where the operator's alerts go.
type AlertOptions struct {
	URL, Secret string
}

// Node is the engine of one webhookd process, wired once for every way
// webhookd runs (serve, bench): the Service the API calls, the Dispatcher
// that makes the attempts, the operator alerts and the Janitor. Start and
// Stop run them all, in one order.
type Node struct {
	Service    *Service
	Dispatcher *Dispatcher

	store   Store
	alerts  *AlertSink // nil without NodeOptions.Alerts
	alertTo *AlertOptions
	janitor *Janitor // nil without NodeOptions.Janitor
	log     *slog.Logger
}

// NewNode wires a Node over store.
func NewNode(store Store, opts NodeOptions) *Node {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{store: store, alertTo: opts.Alerts, log: opts.Logger}
	if opts.Janitor != nil {
		jo := *opts.Janitor
		if jo.Logger == nil {
			jo.Logger = opts.Logger
		}
		promoted := jo.Promoted
		jo.Promoted = func(w Work) { // a line retention unblocked goes on now
			n.Dispatcher.Enqueue(w.DeliveryID, w.TenantID, w.EndpointID, time.Time{})
			if promoted != nil {
				promoted(w)
			}
		}
		n.janitor = NewJanitor(store, jo)
	}
	dopts := opts.Dispatcher
	dopts.OnAlert = n.raise
	if dopts.Logger == nil {
		dopts.Logger = opts.Logger
	}
	n.Dispatcher = NewDispatcher(store, dopts)
	sopts := opts.Service
	if n.janitor != nil {
		deleted := sopts.TenantDeleted
		sopts.TenantDeleted = func(tenant string) {
			n.janitor.Wake()
			if deleted != nil {
				deleted(tenant)
			}
		}
	}
	n.Service = NewService(store, n.Dispatcher, sopts)
	if opts.Alerts != nil {
		n.alerts = NewAlertSink(n.Service, func(err error) { n.log.Warn("operator alert", "err", err) })
	}
	return n
}

// raise is the dispatcher's OnAlert: it hands a to the alert sink, if
// alerts are on.
func (n *Node) raise(a Alert) {
	if n.alerts != nil {
		n.alerts.Put(a)
	}
}

// Start runs the node: the operator's alert endpoint made sure of, the
// alert sink, the dispatcher (its recovery included: Start returns after
// it) and the janitor.
func (n *Node) Start(ctx context.Context) error {
	if n.alerts != nil {
		if err := n.Service.EnsureOperatorEndpoint(ctx, n.alertTo.URL, n.alertTo.Secret); err != nil {
			return fmt.Errorf("alerts: %w", err)
		}
		n.alerts.Start()
	}
	if err := n.Dispatcher.Start(ctx); err != nil {
		n.alerts.stopIfAny()
		return fmt.Errorf("start dispatcher: %w", err)
	}
	if n.janitor != nil {
		n.janitor.Start()
	}
	return nil
}

// Stop stops the node softly, in this order: the dispatcher (attempts in
// flight finish and their outcomes are recorded), then the alert sink (it
// raises the alerts the last attempts queued), then the janitor (its
// transaction under way ends). Each waits only until ctx ends: then Stop
// returns ctx's error, joined with what each part left running (see
// Dispatcher.Stop). The store is the caller's to close after. Safe to
// call twice, and before Start.
func (n *Node) Stop(ctx context.Context) error {
	err := n.Dispatcher.Stop(ctx)
	if n.alerts != nil {
		err = errors.Join(err, n.alerts.stopWithin(ctx))
	}
	if n.janitor != nil {
		err = errors.Join(err, n.janitor.stopWithin(ctx))
	}
	return err
}

// stopIfAny stops k when there is one.
func (k *AlertSink) stopIfAny() {
	if k != nil {
		k.Stop()
	}
}
