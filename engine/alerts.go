package engine

// OperatorTenant is the tenant that holds the operator's operational
// endpoints (operational.go): those made through /v1/operational-endpoints
// and the config file's [alerts]. Its id cannot be named through the API
// (tenant ids start with a letter or digit), so no customer can read,
// change or receive it; it is reserved, no customer, and no listing or
// report of tenants shows it (Service.Tenants).
const OperatorTenant = "_operator"
