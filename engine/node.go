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
	// Alerts, when set, is the config file's [alerts]: the operational
	// endpoint Start makes sure of (EnsureOperatorEndpoint). Nil: Start
	// deletes that endpoint if there is one (RemoveOperatorEndpoint).
	// Operational events are emitted either way, to whatever
	// operational endpoints there are (OperationalSink).
	Alerts *AlertOptions
	// Janitor, when set, prunes what retention no longer keeps and purges
	// deleted tenants (the store's Maintenance). The deliveries its pruning makes a line's head go to the Dispatcher
	// (Enqueue), then to its own Promoted, if any.
	Janitor *JanitorOptions
	Logger  *slog.Logger // nil: discard
	// Tracer, when set, traces the Service's ingests and the
	// Dispatcher's attempts (tracing.go): it is their Tracer, unless
	// theirs is set. Nil: nothing is traced.
	Tracer Tracer
}

// AlertOptions are the [alerts] endpoint's URL and signing secret.
type AlertOptions struct {
	URL, Secret string
}

// Node is the engine of one webhookd process, wired once for every way
// webhookd runs (serve, bench): the Service the API calls and its
// background tasks, the Dispatcher that makes the attempts, the
// operational events and the Janitor. Start and Stop run them all, in one
// order.
type Node struct {
	Service    *Service
	Dispatcher *Dispatcher

	store   Store
	ops     *OperationalSink
	alertTo *AlertOptions // nil without [alerts]
	janitor *Janitor      // nil without NodeOptions.Janitor
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
		if jo.DropOrphaned == nil {
			jo.DropOrphaned = func(ctx context.Context, e EndpointRef) (int, error) {
				return n.Service.dropPaused(ctx, e.TenantID, e.EndpointID)
			}
		}
		n.janitor = NewJanitor(store, jo)
	}
	dopts := opts.Dispatcher
	dopts.OnAlert = n.raise
	if dopts.Tracer == nil {
		dopts.Tracer = opts.Tracer
	}
	if dopts.Logger == nil {
		dopts.Logger = opts.Logger
	}
	n.Dispatcher = NewDispatcher(store, dopts)
	sopts := opts.Service
	if _, shared := dopts.Scheduler.(SharedScheduler); shared {
		sopts.Tasks.Shared = true // other processes run tasks on the store
	}
	if sopts.Tasks.Logger == nil {
		sopts.Tasks.Logger = opts.Logger
	}
	if sopts.Tracer == nil {
		sopts.Tracer = opts.Tracer
	}
	n.Service = NewService(store, n.Dispatcher, sopts)
	n.ops = NewOperationalSink(n.Service, func(err error) { n.log.Warn("operational event", "err", err) })
	return n
}

// raise is the dispatcher's OnAlert: it hands a to the operational
// events.
func (n *Node) raise(a Alert) {
	n.ops.PutAlert(a)
}

// Start runs the node: the [alerts] endpoint made sure of (or deleted
// without [alerts]), the operational events, the dispatcher (its
// recovery included: Start returns after it), the tasks left running
// (Service.ResumeTasks) and the janitor.
func (n *Node) Start(ctx context.Context) error {
	if n.alertTo != nil {
		if err := n.Service.EnsureOperatorEndpoint(ctx, n.alertTo.URL, n.alertTo.Secret); err != nil {
			return fmt.Errorf("alerts: %w", err)
		}
	} else if err := n.Service.RemoveOperatorEndpoint(ctx); err != nil {
		return fmt.Errorf("alerts: remove the [alerts] endpoint: %w", err)
	}
	n.ops.Start()
	if err := n.Dispatcher.Start(ctx); err != nil {
		n.ops.Stop()
		return fmt.Errorf("start dispatcher: %w", err)
	}
	if resumed, err := n.Service.ResumeTasks(ctx); err != nil {
		n.Dispatcher.Stop(context.WithoutCancel(ctx))
		n.ops.Stop()
		return err
	} else if resumed > 0 {
		n.log.Info("tasks resumed", "count", resumed)
	}
	if n.janitor != nil {
		n.janitor.Start()
	}
	return nil
}

// Stop stops the node softly, in this order: the fan-outs its ingests
// left owed (stored), the tasks (each after its step under way, left
// running in the store for the next process), the dispatcher (attempts
// in flight finish and their outcomes are recorded), then the
// operational events (the sink stores those queued, the last attempts'
// and tasks' among them), then the janitor (its
// transaction under way ends). Each waits only until ctx ends: then Stop
// returns ctx's error, joined with what each part left running (see
// Dispatcher.Stop). The store is the caller's to close after. Safe to
// call twice, and before Start.
func (n *Node) Stop(ctx context.Context) error {
	// What the last ingests left owed is stored first, and handed to the
	// dispatcher before it stops: a clean stop leaves none for the next
	// start to store.
	err := n.Service.WaitFanOut(ctx)
	err = errors.Join(err, n.Service.StopTasks(ctx))
	err = errors.Join(err, n.Dispatcher.Stop(ctx))
	err = errors.Join(err, n.ops.stopWithin(ctx))
	if n.janitor != nil {
		err = errors.Join(err, n.janitor.stopWithin(ctx))
	}
	return err
}
