//go:build tools

// Package oauth2proxy pins oauth2-proxy for palmgate's integration tests
// (integration/oauth2proxy_test.go), which build it from this module with
// `go build github.com/oauth2-proxy/oauth2-proxy/v7` (the go.mod's tool line); it
// is not part of palmgate's module.
package oauth2proxy
