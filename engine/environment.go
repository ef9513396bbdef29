package engine

import (
	"context"
)

// Environment keeps test data apart from live data. Every tenant is in one
// environment, fixed when it is created; every API token is for one. A test
// token acts only on test tenants, so an integration under development can
// never read, change or send a live customer's webhooks.
type Environment string

const (
	// EnvironmentLive is for real customers. Tenants stored before
	// environments existed are live.
	EnvironmentLive Environment = "live"
	// EnvironmentTest is for trying things out: a test token may create
	// test tenants and act on them, and on nothing else.
	EnvironmentTest Environment = "test"
)

// ValidateEnvironment reports a CodeInvalidField error for field unless env
// is "test" or "live".
func ValidateEnvironment(field string, env Environment) error {
	switch env {
	case EnvironmentLive, EnvironmentTest:
		return nil
	}
	return Errorf(CodeInvalidField, field, `%s must be "test" or "live"`, field)
}

type callerEnvironmentKey struct{}

// WithCallerEnvironment returns a copy of ctx that says the caller holds a
// credential for env. httpapi sets it from the bearer token; the Service
// enforces it where the store alone cannot (creating a tenant). A context
// without it is a trusted caller, such as a test or a command of the
// operator's, and may act on both environments.
func WithCallerEnvironment(ctx context.Context, env Environment) context.Context {
	return context.WithValue(ctx, callerEnvironmentKey{}, env)
}

// CallerEnvironment returns the environment WithCallerEnvironment put in
// ctx, or "" when there is none.
func CallerEnvironment(ctx context.Context) Environment {
	env, _ := ctx.Value(callerEnvironmentKey{}).(Environment)
	return env
}

// putTenant is PutTenant: a tenant's environment is chosen when it is
// created (in.Environment, else the caller's if it is test, else
// ServiceOptions.DefaultEnvironment) and never changes. A test caller may
// neither create a live tenant nor touch an existing one.
func (s *Service) putTenant(ctx context.Context, id string, in TenantInput) (Tenant, bool, error) {
	if err := ValidateTenantID(id); err != nil {
		return Tenant{}, false, err
	}
	if err := ValidateText("name", in.Name, MaxTenantNameLen, IdentifierText); err != nil {
		return Tenant{}, false, err
	}
	if in.Environment != "" {
		if err := ValidateEnvironment("environment", in.Environment); err != nil {
			return Tenant{}, false, err
		}
	}
	if in.RetryPolicy != "" {
		if err := s.checkRetryPolicy("retry_policy", in.RetryPolicy); err != nil {
			return Tenant{}, false, err
		}
	}
	caller := CallerEnvironment(ctx)
	env := in.Environment
	old, err := s.store.Tenant(ctx, id)
	switch {
	case err == nil:
		if caller == EnvironmentTest && old.Environment != EnvironmentTest {
			return Tenant{}, false, errWrongEnvironment(id, old.Environment)
		}
		if env != "" && env != old.Environment {
			return Tenant{}, false, EnvironmentNeverChanges(id, old.Environment)
		}
		env = old.Environment
	case ErrorCode(err) == CodeTenantNotFound:
		if env == "" {
			env = s.opts.DefaultEnvironment
			if caller == EnvironmentTest {
				env = EnvironmentTest
			}
		}
		if caller == EnvironmentTest && env != EnvironmentTest {
			return Tenant{}, false, Errorf(CodeForbidden, "environment", "a test token can only create test tenants")
		}
	default:
		return Tenant{}, false, err
	}
	now := s.now()
	// The store refuses to change an existing tenant's environment, so a
	// tenant created meanwhile by another caller is not converted.
	return s.store.PutTenant(ctx, Tenant{ID: id, Name: in.Name, Environment: env, RetryPolicy: RetryPolicyName(in.RetryPolicy), Created: now, Updated: now})
}

// errWrongEnvironment is what a test caller gets for a live tenant.
func errWrongEnvironment(tenant string, env Environment) error {
	return Errorf(CodeForbidden, "tenant", "tenant %s is %s: a test token acts on test tenants only", tenant, env)
}

// CheckTenantAccess reports CodeForbidden when the caller in ctx holds a
// test credential and tenant exists in the live environment. A tenant that
// does not exist passes: the operation that follows reports it. httpapi
// calls it before every tenant route for test tokens.
func (s *Service) CheckTenantAccess(ctx context.Context, tenant string) error {
	if CallerEnvironment(ctx) != EnvironmentTest {
		return nil
	}
	if ValidateTenantID(tenant) != nil {
		return nil // not a tenant that can exist; the route answers it
	}
	t, err := s.store.Tenant(ctx, tenant)
	switch {
	case err == nil:
		if t.Environment != EnvironmentTest {
			return errWrongEnvironment(tenant, t.Environment)
		}
		return nil
	case ErrorCode(err) == CodeTenantNotFound:
		return nil
	}
	return err
}
