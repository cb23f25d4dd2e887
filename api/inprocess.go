package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// NewInProcessClient returns a client that serves each request with h in
// the same process, nothing crossing a network: a Client talks to a Server
// over a database file exactly as it talks to a daemon. base only names
// the server in URLs and errors.
func NewInProcessClient(base string, h http.Handler) *Client {
	return NewClient(base, "", &http.Client{Transport: handlerTransport{h: h}})
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
