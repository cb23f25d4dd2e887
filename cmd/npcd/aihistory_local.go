package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/npcd/npcd/internal/schema"
	"io"
	"net/http"
	"strconv"

	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

// schemaCurrent checks that a database opened read-only is at the schema
// this binary knows: an older one cannot be migrated without writing, and a
// newer one may hold what this binary cannot read.
func schemaCurrent(ctx context.Context, db *gorm.DB) error {
	have, err := store.Versions(ctx, db)
	if err != nil {
		return fmt.Errorf("read the schema version (is this an npcd database?): %w", err)
	}
	latest := map[string]int{}
	var order []string
	for _, m := range schema.Migrations() {
		if _, ok := latest[m.Component]; !ok {
			order = append(order, m.Component)
		}
		latest[m.Component] = max(latest[m.Component], m.Version)
	}
	for _, comp := range order {
		switch v := have[comp]; {
		case v < latest[comp]:
			return fmt.Errorf("the database is at %s schema %d, this npcd needs %d: start the daemon on it once to upgrade it",
				comp, v, latest[comp])
		case v > latest[comp]:
			return fmt.Errorf("%w: %s is at version %d, this binary knows %d", store.ErrSchemaNewer, comp, v, latest[comp])
		}
	}
	return nil
}

// handlerTransport is an http.RoundTripper that serves each request with an
// http.Handler in-process, so an api.Client talks to an api.Server over a
// database file exactly as it talks to a daemon.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not modify the request it is given.
	in := req.Clone(req.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "in-process"
	w := &bufferedResponse{header: http.Header{}}
	t.h.ServeHTTP(w, in)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.header.Set("Content-Length", strconv.Itoa(w.body.Len()))
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.header,
		Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
	}, nil
}

// bufferedResponse is the http.ResponseWriter of handlerTransport.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedResponse) Header() http.Header { return w.header }

func (w *bufferedResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferedResponse) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}
