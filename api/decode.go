package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// readJSON reads the request body, bounded by Config.MaxBodyBytes, and
// decodes it into v strictly (see decodeStrict). When required is false an
// empty body leaves v as it is.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any, required bool) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(body, v, required)
}

// readBody reads a request body within the configured bound.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, mbe
		}
		return nil, &requestError{Field: "body", Message: "could not be read", Err: err}
	}
	return body, nil
}

// decodeStrict decodes one JSON object into v. Unknown fields, values of the
// wrong type, anything but an object at the top and anything after it are
// refused with a *requestError naming the field (e.g. "events[0].at").
func decodeStrict(body []byte, v any, required bool) error {
	// Offsets in decoding errors count from the start of the value, so
	// leading space is dropped to keep them offsets into doc.
	doc := bytes.TrimLeft(body, " \t\r\n")
	if len(doc) == 0 {
		if required {
			return badRequest("body", "is empty; want a JSON object")
		}
		return nil
	}
	if doc[0] != '{' {
		return badRequest("body", "must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(doc, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("body", "has data after the JSON object")
	}
	return nil
}

// decodeError turns a decoding failure into a *requestError naming where in
// doc it happened.
func decodeError(doc []byte, err error) error {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &se):
		return &requestError{Field: "body", Message: fmt.Sprintf("is not valid JSON at byte %d: %s", se.Offset, se.Error()), Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &requestError{Field: "body", Message: "is not valid JSON: it ends too soon", Err: err}
	case errors.As(err, &te):
		field := valuePathAt(doc, te.Offset)
		if field == "" {
			field = te.Field
		}
		return &requestError{Field: field, Message: fmt.Sprintf("must be %s, got %s", jsonKind(te.Type), text.Clip(te.Value, 40)), Err: err}
	}
	// encoding/json reports unknown fields only as text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, uerr := strconv.Unquote(name)
		if uerr == nil {
			return &requestError{Field: unknownFieldParent(doc, name), Message: fmt.Sprintf("unknown field %q", name), Err: err}
		}
	}
	return &requestError{Field: "body", Message: "could not be decoded", Err: err}
}

// jsonKind says in words what JSON a Go type takes.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another type"
}

// valuePathAt returns the path of the value of doc that ends at or after
// offset off: where encoding/json reports a type error (it gives the offset
// just past the value, and a field path without array indices).
func valuePathAt(doc []byte, off int64) string {
	found := ""
	walkJSON(doc, func(path string, end int64, key bool) bool {
		if !key && end >= off {
			found = path
			return true
		}
		return false
	})
	return found
}

// unknownFieldParent returns the path of the object holding the key name
// when name occurs as a key exactly once in doc ("" when it is the top
// level or ambiguous).
func unknownFieldParent(doc []byte, name string) string {
	var parents []string
	walkJSON(doc, func(path string, _ int64, key bool) bool {
		if key && (path == name || strings.HasSuffix(path, "."+name)) {
			parents = append(parents, strings.TrimSuffix(strings.TrimSuffix(path, name), "."))
		}
		return false
	})
	if len(parents) != 1 {
		return ""
	}
	return parents[0]
}

// walkJSON calls visit for every object key and every value of doc in
// order, with its path ("events[0].at") and the offset where its token
// ends. It stops when visit returns true or at the first malformed token.
func walkJSON(doc []byte, visit func(path string, end int64, key bool) bool) {
	type frame struct {
		array   bool
		index   int
		key     string
		needKey bool
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.index)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].needKey = true
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].needKey {
			stack[n-1].key, _ = tok.(string)
			stack[n-1].needKey = false
			if visit(path(), dec.InputOffset(), true) {
				return
			}
			continue
		}
		if visit(path(), dec.InputOffset(), false) {
			return
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, frame{array: d == '[', needKey: d == '{'})
			continue
		}
		valueDone()
	}
}

// query is a request's query string, checked against the parameters a
// route takes.
type query struct{ v url.Values }

// parseQuery refuses unknown and repeated parameters, so a typo such as
// "limt" is an error instead of being silently ignored.
func parseQuery(r *http.Request, allowed ...string) (query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, &requestError{Field: "query", Message: "is malformed", Err: err}
	}
	for name, vals := range v {
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			if len(allowed) == 0 {
				return query{}, badRequest(text.Clip(name, 64), "unknown query parameter; this route takes none")
			}
			return query{}, badRequest(text.Clip(name, 64), "unknown query parameter; this route takes %s", strings.Join(allowed, ", "))
		}
		if len(vals) > 1 {
			return query{}, badRequest(name, "is given more than once")
		}
	}
	return query{v: v}, nil
}

// str returns parameter name, or def when absent.
func (q query) str(name, def string) string {
	if !q.v.Has(name) {
		return def
	}
	return q.v.Get(name)
}

// positive returns parameter name as an integer in [1, most], or def when absent.
func (q query) positive(name string, def, most int64) (int64, error) {
	if !q.v.Has(name) {
		return def, nil
	}
	n, err := strconv.ParseInt(q.v.Get(name), 10, 64)
	switch {
	case (err != nil || n < 1) && most == maxID:
		return 0, badRequest(name, "must be a positive integer")
	case err != nil || n < 1 || n > most:
		return 0, badRequest(name, "must be an integer between 1 and %d", most)
	}
	return n, nil
}
