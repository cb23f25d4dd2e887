// Package api is npcd's HTTP JSON API over the tick engine, described by
// the OpenAPI file it embeds and serves (openapi.yaml), plus a small Go
// client for game servers written in Go.
//
// It owns the routes, the request bodies, envelopes and views (a domain type
// with JSON tags is its own wire type and is sent as it is; see "Wire
// types" in docs/ARCHITECTURE.md), strict decoding of
// request bodies, the mapping of errors to status codes and safe messages,
// bearer-token authentication, the access log (one line per request, by
// route pattern) and the Prometheus metrics (Metrics, which is also the
// engine's tick.Observer).
//
// It must not import cmd. cmd/npcd builds a Server over the engine and the
// stores and serves it; Go game servers call it through Client.
package api
