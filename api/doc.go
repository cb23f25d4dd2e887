// Package api is npcd's HTTP JSON API over the tick engine, described by
// the OpenAPI file it embeds and serves (openapi.yaml), plus a small Go
// client for game servers written in Go.
//
// It owns the routes, the request and response types, strict decoding of
// request bodies, the mapping of errors to status codes and safe messages,
// bearer-token authentication, the access log (one line per request, by
// route pattern) and the Prometheus metrics (Metrics, which is also the
// engine's tick.Observer).
//
// It must not import cmd. cmd/npcd builds a Server over the engine and the
// stores and serves it; Go game servers call it through Client.
package api
