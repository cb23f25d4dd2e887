package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

// Error codes of error responses. Status codes and codes are part of the
// API contract.
const (
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeExists           = "exists"
	CodePayloadTooLarge  = "payload_too_large"
	CodeInvalidSchema    = "invalid_schema"
	CodeInvalidValue     = "invalid_value"
	CodeTooBusy          = "too_busy"
	CodeInternal         = "internal"
	CodeModelError       = "model_error"
	CodeModelUnavailable = "model_unavailable"
	CodeShuttingDown     = "shutting_down"
	CodeTimeout          = "timeout"
)

// How long clients are told to wait before retrying.
const (
	retryBusy  = 1 * time.Second
	retryInbox = 5 * time.Second
	retryModel = 10 * time.Second
)

// requestError is a request refused by the API itself, before it reaches
// the engine. Field names the offending field, parameter or "body"; Err is
// an underlying cause for the log, never shown.
type requestError struct {
	Field   string
	Message string
	Err     error
}

func (e *requestError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func (e *requestError) Unwrap() error { return e.Err }

func badRequest(field, format string, args ...any) error {
	return &requestError{Field: field, Message: fmt.Sprintf(format, args...)}
}

var (
	errUnauthorized = errors.New("api: missing or wrong bearer token")
	errNoRoute      = errors.New("api: no such route")
)

// methodError is a known path asked with a method it does not serve.
type methodError struct{ allow []string }

func (e *methodError) Error() string { return "api: method not allowed" }

// problem is what a failed request answers.
type problem struct {
	status     int
	code       string
	message    string
	retryAfter time.Duration
	allow      string // the Allow header of a 405
}

// classify maps err to its status, code and safe message. It is the only
// place that decides a status code from an error. Messages are built from
// our own typed errors, whose texts are safe, or written here; the text of
// any other error never reaches a client. npc is the NPC the request was
// about, for not-found messages.
func classify(err error, npc string) problem {
	var (
		re  *requestError
		mbe *http.MaxBytesError
		me  *methodError
		fe  *character.FieldError
		ue  *character.UnfitError
		ie  *tick.InputError
		ve  *tick.ValueError
		se  *tools.SchemaError
		ce  *tick.ConflictError
		le  *llm.Error
		nfe *inspect.NotFoundError
		tnf *tick.NotFoundError
	)
	switch {
	case errors.As(err, &re):
		return problem{status: http.StatusBadRequest, code: CodeBadRequest, message: re.Error()}
	case errors.As(err, &mbe):
		return problem{status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge,
			message: fmt.Sprintf("request body is larger than %d bytes", mbe.Limit)}
	case errors.Is(err, errUnauthorized):
		return problem{status: http.StatusUnauthorized, code: CodeUnauthorized, message: "missing or wrong bearer token"}
	case errors.Is(err, errNoRoute):
		return problem{status: http.StatusNotFound, code: CodeNotFound, message: "no such route"}
	case errors.As(err, &me):
		allow := strings.Join(me.allow, ", ")
		return problem{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed, allow: allow, message: "method not allowed; allowed: " + allow}
	case errors.As(err, &ue):
		return problem{status: http.StatusUnprocessableEntity, code: CodeInvalidValue, message: ue.Error()}
	case errors.As(err, &fe):
		return problem{status: http.StatusBadRequest, code: CodeBadRequest, message: fe.Error()}
	case errors.As(err, &ve):
		return problem{status: http.StatusUnprocessableEntity, code: CodeInvalidValue, message: ve.Error()}
	case errors.As(err, &ie):
		return problem{status: http.StatusBadRequest, code: CodeBadRequest, message: ie.Error()}
	case errors.As(err, &se):
		return problem{status: http.StatusUnprocessableEntity, code: CodeInvalidSchema, message: se.Error()}
	case errors.As(err, &ce):
		return problem{status: http.StatusConflict, code: CodeConflict, message: ce.Error()}
	case errors.Is(err, tick.ErrConflict), errors.Is(err, character.ErrNotAwaiting), errors.Is(err, character.ErrAlreadyAnswer):
		return problem{status: http.StatusConflict, code: CodeConflict, message: "the request does not fit the npc's current state"}
	case errors.Is(err, character.ErrExists):
		return problem{status: http.StatusPreconditionFailed, code: CodeExists, message: fmt.Sprintf("npc %q already exists; it was left unchanged", npc)}
	case errors.As(err, &tnf):
		return problem{status: http.StatusNotFound, code: CodeNotFound, message: tnf.Error()}
	case errors.As(err, &nfe):
		return problem{status: http.StatusNotFound, code: CodeNotFound, message: nfe.Error()}
	case errors.Is(err, character.ErrNotFound) && npc != "":
		return problem{status: http.StatusNotFound, code: CodeNotFound, message: fmt.Sprintf("npc %q does not exist", npc)}
	case errors.Is(err, character.ErrNotFound), errors.Is(err, journal.ErrNotFound), errors.Is(err, sleep.ErrNotFound):
		return problem{status: http.StatusNotFound, code: CodeNotFound, message: "not found"}
	case errors.Is(err, character.ErrInboxFull):
		return problem{status: http.StatusTooManyRequests, code: CodeTooBusy, retryAfter: retryInbox,
			message: fmt.Sprintf("npc %q has too many pending events; tick it, then retry", npc)}
	case errors.Is(err, tick.ErrBusy), errors.Is(err, sleep.ErrBusy):
		return problem{status: http.StatusTooManyRequests, code: CodeTooBusy, retryAfter: retryBusy,
			message: fmt.Sprintf("npc %q is busy; retry", npc)}
	case errors.Is(err, tick.ErrClosed):
		return problem{status: http.StatusServiceUnavailable, code: CodeShuttingDown, message: "npcd is shutting down"}
	case errors.As(err, &le):
		return modelProblem(le)
	case errors.Is(err, context.DeadlineExceeded):
		return problem{status: http.StatusServiceUnavailable, code: CodeTimeout, retryAfter: retryBusy, message: "the request took too long; retry"}
	}
	return problem{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error; the cause is in npcd's log"}
}

// modelProblem maps a model failure by its code: a provider that is out of
// reach, overloaded or slow (still so after the client's retries: 429, 5xx,
// an error page from a proxy, a refused or dropped connection, a cut-off
// answer, a timeout) is 503 with Retry-After, since the same request can
// succeed later; an answer that is unusable, or a request the provider
// refuses, is 502, since retrying it as is will not help.
func modelProblem(le *llm.Error) problem {
	switch le.Code {
	case llm.CodeRateLimit, llm.CodeTimeout, llm.CodeUnavailable:
		wait := le.RetryAfter
		if wait <= 0 {
			wait = retryModel
		}
		msg := "the model provider is rate limiting; retry later"
		switch le.Code {
		case llm.CodeTimeout:
			msg = "the model did not answer in time; retry later"
		case llm.CodeUnavailable:
			msg = "the model provider is unavailable; retry later"
		}
		return problem{status: http.StatusServiceUnavailable, code: CodeModelUnavailable, retryAfter: wait, message: msg}
	}
	return problem{status: http.StatusBadGateway, code: CodeModelError,
		message: fmt.Sprintf("the model call failed (%s)", modelReason(le.Code))}
}

func modelReason(c llm.Code) string {
	switch c {
	case llm.CodeOverflow:
		return "context overflow after recovery"
	case llm.CodeAuth:
		return "provider refused npcd's credentials"
	case llm.CodeBadRequest:
		return "provider rejected the request"
	case llm.CodeBadResponse:
		return "provider answered with something unusable"
	case llm.CodeBadToolCall:
		return "unusable tool call"
	}
	return "model failure"
}

// fail answers a failed request and logs its cause once, here.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	npc := r.PathValue("npc")
	p := classify(err, npc)
	s.logProblem(r, npc, p, err)
	writeProblem(w, p)
}

// logProblem logs what a client was told and why: server-side failures at
// error level with their cause, waits at warn, client mistakes at debug.
func (s *Server) logProblem(r *http.Request, npc string, p problem, err error) {
	var ev *zerolog.Event
	switch {
	case p.status >= 500 && p.status != http.StatusServiceUnavailable:
		ev = s.cfg.Log.Error()
	case p.status >= 500 || p.status == http.StatusTooManyRequests:
		ev = s.cfg.Log.Warn()
	default:
		ev = s.cfg.Log.Debug()
	}
	ev = ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", p.status).Str("code", p.code)
	if npc != "" {
		ev = ev.Str("npc", npc)
	}
	if c := llm.CodeOf(err); c != "" {
		ev = ev.Str("llm_code", string(c))
	}
	ev.Err(err).Msg("request failed")
}

// writeProblem writes the one error body shape every error response has.
func writeProblem(w http.ResponseWriter, p problem) {
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(p.retryAfter.Seconds()))))
	}
	if p.allow != "" {
		w.Header().Set("Allow", p.allow)
	}
	if p.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="npcd"`)
	}
	writeJSON(w, p.status, ErrorBody{Error: ErrorDetail{Code: p.code, Message: p.message}})
}

// writeJSON writes v as the response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Our response types always marshal; this guards against a NaN
		// slipping into a float.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error; the response could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
