package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/internal/version"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
)

// DefaultMaxBodyBytes is the default bound on a request body.
const DefaultMaxBodyBytes = 1 << 20

// Config tunes the Server. The zero value is valid: no authentication, 1 MiB
// bodies, no logging.
type Config struct {
	// Token is the bearer token every /v1 request must carry
	// ("Authorization: Bearer <token>"); empty disables authentication.
	// /healthz, /metrics and /openapi.yaml are always open.
	Token string
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Log gets one access line per request (method, route pattern, status,
	// duration, NPC) and one line per failed request with its cause; the
	// zero value logs nothing.
	Log zerolog.Logger
}

// Validate checks the config after defaults.
func (c *Config) Validate() error {
	switch {
	case c.MaxBodyBytes < 1:
		return errors.New("api: MaxBodyBytes must be positive")
	case strings.TrimSpace(c.Token) != c.Token || strings.ContainsAny(c.Token, " \t\r\n"):
		return errors.New("api: Token must not contain white space")
	}
	return nil
}

// Engine runs NPCs; *tick.Engine satisfies it.
type Engine interface {
	PutNPC(ctx context.Context, c *character.Character) (created bool, err error)
	CreateNPC(ctx context.Context, c *character.Character) error
	DeleteNPC(ctx context.Context, id string) error
	PostEvents(ctx context.Context, id string, in []tick.EventInput) (accepted, duplicates int, err error)
	PostToolResults(ctx context.Context, id string, results []tick.ToolResult) error
	TickWithKey(ctx context.Context, id, key string) (*tick.Result, error)
	PendingNPCs(ctx context.Context, scope string) ([]string, error)
	TickEach(ctx context.Context, ids []string, keys map[string]string, done func(i int, r *tick.Result, err error))
	Outcome(ctx context.Context, id string, n int64) (*tick.Result, error)
	Actions(ctx context.Context, fq tick.FeedQuery) (*tick.Feed, error)
	FeedStopped() <-chan struct{}
	Compact(ctx context.Context, id, instruction string) (*sleep.Record, error)
	ClearContext(ctx context.Context, id string) error
	Sleep(ctx context.Context, id string) (*sleep.Report, error)
}

// NPCs reads NPCs and what they own; *character.Store satisfies it.
type NPCs interface {
	Get(ctx context.Context, id string) (*character.Character, error)
	List(ctx context.Context) ([]character.Character, error)
	History(ctx context.Context, id string, hq character.HistoryQuery) ([]character.Message, error)
	Profiles(ctx context.Context, id string, entities ...string) ([]character.Profile, error)
}

// Journal reads journal entries; *journal.Store satisfies it.
type Journal interface {
	List(ctx context.Context, id string, lq journal.ListQuery) ([]journal.Entry, error)
}

// Compactions reads compaction records; *sleep.Compactor satisfies it.
type Compactions interface {
	Records(ctx context.Context, id string) ([]sleep.Record, error)
}

// Retriever searches what an NPC remembers; *journal.Store and
// *journal.Retriever satisfy it.
type Retriever interface {
	Search(ctx context.Context, npc, query string, k int) ([]journal.Result, error)
}

// Inspector reads the views of `npcd aihistory` that need more than one
// store; *inspect.Inspector satisfies it.
type Inspector interface {
	Overview(ctx context.Context, npc string) (*inspect.Overview, error)
	AsOf(ctx context.Context, npc string, tick int64) (*inspect.AsOf, error)
	Diff(ctx context.Context, npc string, id int64) (*inspect.Diff, error)
	Timeline(ctx context.Context, npc string, tq inspect.TimelineQuery) (*inspect.Timeline, error)
	Message(ctx context.Context, npc string, id int64) (*character.Message, *sleep.Record, error)
	Entry(ctx context.Context, npc string, id int64) (*journal.Entry, error)
	Memory(ctx context.Context, npc string, id int64) (*journal.Memory, error)
	Compactions(ctx context.Context, npc string, ids []int64) ([]sleep.Record, error)
}

// SleepSchedule says when an NPC's next scheduled sleep is due;
// *sleep.Scheduler satisfies it.
type SleepSchedule interface {
	NextRun(id string) (time.Time, bool)
}

// Deps are the Server's collaborators. Engine, NPCs, Journal, Compactions,
// Retriever and Inspector are required.
type Deps struct {
	Engine      Engine
	NPCs        NPCs
	Journal     Journal
	Compactions Compactions
	Retriever   Retriever
	Inspector   Inspector
	// Sleeps is the daemon's sleep scheduler. When nil (a server over a
	// database file, not a daemon) the overview says the next sleep is
	// unknown.
	Sleeps SleepSchedule
	// Metrics is served at /metrics. Pass the same Metrics as the engine's
	// tick.Deps.Observer so ticks are counted; when nil, New makes one that
	// only counts what the Server itself sees (manual compactions).
	Metrics *Metrics
}

// Server is the HTTP API. It is an http.Handler, safe for concurrent use;
// it holds no state besides its configuration and dependencies.
type Server struct {
	cfg     Config
	deps    Deps
	mux     *http.ServeMux
	token   [sha256.Size]byte
	methods []string // every method some route serves, for 405s
}

// New builds a Server. It fails on an invalid Config or missing Deps.
func New(cfg Config, deps Deps) (*Server, error) {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Engine == nil || deps.NPCs == nil || deps.Journal == nil || deps.Compactions == nil || deps.Retriever == nil || deps.Inspector == nil {
		return nil, errors.New("api: Engine, NPCs, Journal, Compactions, Retriever and Inspector are required")
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics()
	}
	s := &Server{cfg: cfg, deps: deps, mux: http.NewServeMux()}
	if cfg.Token != "" {
		s.token = sha256.Sum256([]byte(cfg.Token))
	}
	seen := map[string]bool{}
	for _, rt := range routeTable() {
		s.mux.Handle(rt.method+" "+rt.pattern, s.handler(rt))
		if !seen[rt.method] {
			seen[rt.method] = true
			s.methods = append(s.methods, rt.method)
		}
	}
	s.mux.Handle("/", http.HandlerFunc(s.unrouted))
	return s, nil
}

// Observer returns the Server's metrics as a tick.Observer, for wiring an
// engine built after the Server.
func (s *Server) Observer() tick.Observer { return s.deps.Metrics }

// route is one entry of the route table.
type route struct {
	method  string
	pattern string // a ServeMux path pattern; {npc} is the NPC id
	open    bool   // served without the bearer token
	handle  func(s *Server, w http.ResponseWriter, r *http.Request) error
}

// routeTable lists every route; New registers them and a test checks them
// against openapi.yaml. Add a route here and in openapi.yaml together.
func routeTable() []route {
	return []route{
		{method: "GET", pattern: "/healthz", open: true, handle: (*Server).healthz},
		{method: "GET", pattern: "/metrics", open: true, handle: (*Server).metrics},
		{method: "GET", pattern: "/openapi.yaml", open: true, handle: (*Server).openAPI},

		{method: "GET", pattern: "/v1/npcs", handle: (*Server).listNPCs},
		{method: "PUT", pattern: "/v1/npcs/{npc}", handle: (*Server).putNPC},
		{method: "GET", pattern: "/v1/npcs/{npc}", handle: (*Server).getNPC},
		{method: "PATCH", pattern: "/v1/npcs/{npc}", handle: (*Server).patchNPC},
		{method: "DELETE", pattern: "/v1/npcs/{npc}", handle: (*Server).deleteNPC},

		{method: "POST", pattern: "/v1/npcs/{npc}/events", handle: (*Server).postEvents},
		{method: "POST", pattern: "/v1/npcs/{npc}/tick", handle: (*Server).tick},
		{method: "POST", pattern: "/v1/tick", handle: (*Server).tickMany},
		{method: "GET", pattern: "/v1/npcs/{npc}/ticks/{tick}", handle: (*Server).outcome},
		{method: "GET", pattern: "/v1/actions", handle: (*Server).actions},
		{method: "GET", pattern: "/v1/actions/stream", handle: (*Server).actionStream},
		{method: "POST", pattern: "/v1/npcs/{npc}/tool-results", handle: (*Server).postToolResults},
		{method: "POST", pattern: "/v1/npcs/{npc}/compact", handle: (*Server).compact},
		{method: "DELETE", pattern: "/v1/npcs/{npc}/context", handle: (*Server).clearContext},
		{method: "POST", pattern: "/v1/npcs/{npc}/sleep", handle: (*Server).sleep},

		{method: "GET", pattern: "/v1/npcs/{npc}/history", handle: (*Server).history},
		{method: "GET", pattern: "/v1/npcs/{npc}/journal", handle: (*Server).journal},
		{method: "GET", pattern: "/v1/npcs/{npc}/profiles", handle: (*Server).profiles},
		{method: "GET", pattern: "/v1/npcs/{npc}/compactions", handle: (*Server).compactions},
		{method: "GET", pattern: "/v1/npcs/{npc}/overview", handle: (*Server).overview},
		{method: "GET", pattern: "/v1/npcs/{npc}/memory", handle: (*Server).memory},
		{method: "GET", pattern: "/v1/npcs/{npc}/messages/{id}", handle: (*Server).message},
		{method: "GET", pattern: "/v1/npcs/{npc}/journal/{id}", handle: (*Server).entry},
		{method: "GET", pattern: "/v1/npcs/{npc}/memories/{id}", handle: (*Server).memoryByID},
		{method: "GET", pattern: "/v1/npcs/{npc}/compactions/{id}/diff", handle: (*Server).diff},
		{method: "GET", pattern: "/v1/npcs/{npc}/as-of", handle: (*Server).asOf},
		{method: "GET", pattern: "/v1/npcs/{npc}/timeline", handle: (*Server).timeline},
	}
}

// ServeHTTP serves the API. A panic in a handler is answered 500 and
// logged, not left to net/http, so the client still gets an error body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() { s.served(r, sw.code(), time.Since(start)) }()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.fail(sw, r, fmt.Errorf("api: panic: %v", v))
		}
	}()
	s.mux.ServeHTTP(sw, r)
}

// served writes the access log line and the request metrics of one
// request. The route is the pattern that matched (the mux sets it on r), so
// neither log nor metrics grow with the NPCs' names. Scrapes, health checks
// and the document log at debug level: they come every few seconds.
func (s *Server) served(r *http.Request, status int, d time.Duration) {
	route := routeOf(r)
	s.deps.Metrics.Request(r.Method, route, status, d)
	ev := s.cfg.Log.Info()
	if route == "/healthz" || route == "/metrics" || route == "/openapi.yaml" {
		ev = s.cfg.Log.Debug()
	}
	if !ev.Enabled() {
		return
	}
	ev = ev.Str("method", r.Method).Str("route", route).Int("status", status).
		Float64("duration_ms", float64(d.Microseconds())/1000)
	if npc := r.PathValue("npc"); npc != "" {
		ev = ev.Str("npc", npc)
	}
	ev.Msg("request")
}

// unmatchedRoute labels requests no route matched.
const unmatchedRoute = "unmatched"

// routeOf is the path pattern of the route that served r, without its
// method, or unmatchedRoute.
func routeOf(r *http.Request) string {
	_, path, ok := strings.Cut(r.Pattern, " ")
	if !ok || path == "/" {
		return unmatchedRoute
	}
	return path
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (s *Server) handler(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.open && !s.authorized(r) {
			s.fail(w, r, errUnauthorized)
			return
		}
		if err := rt.handle(s, w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// unrouted answers requests no route matched: 405 when the path exists
// with other methods, 404 otherwise. /v1 paths need the token first, so
// they do not reveal which routes exist.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) {
	if (r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/")) && !s.authorized(r) {
		s.fail(w, r, errUnauthorized)
		return
	}
	var allow []string
	for _, m := range s.methods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		s.fail(w, r, &methodError{allow: allow})
		return
	}
	s.fail(w, r, errNoRoute)
}

// authorized reports whether r carries the configured bearer token. The
// comparison is of fixed-length digests in constant time, so neither the
// token nor its length leaks through timing.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}

// npcID returns the route's {npc}, refusing an invalid id.
func npcID(r *http.Request) (string, error) {
	id := r.PathValue("npc")
	if !character.ValidID(id) {
		return "", badRequest("npc", "must be 1-64 characters of a-z 0-9 _ -")
	}
	return id, nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, Health{Status: "ok", Version: version.String()})
	return nil
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	s.deps.Metrics.handler.ServeHTTP(w, r)
	return nil
}
