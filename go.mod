module github.com/webhookd/webhookd

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/julienschmidt/httprouter v1.3.0
	github.com/standard-webhooks/standard-webhooks/libraries v1.3.0
	github.com/stripe/stripe-go/v82 v82.5.1
	go.etcd.io/bbolt v1.5.0
	golang.org/x/time v0.16.0
)

require golang.org/x/sys v0.45.0 // indirect
