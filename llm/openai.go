package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/npcd/npcd/internal/version"
)

// Defaults applied by NewClient to zero fields of ClientConfig.
const (
	DefaultEmbeddingModel = "text-embedding-3-small"
	DefaultTimeout        = 60 * time.Second
	DefaultMaxRetries     = 3
	DefaultMinBackoff     = 500 * time.Millisecond
	DefaultMaxBackoff     = 20 * time.Second
	// DefaultSchemaName names Request.JSONSchema when Request.SchemaName is empty.
	DefaultSchemaName = "answer"
	// EmbedBatchSize is the most texts Embed sends in one request.
	EmbedBatchSize = 256
)

// ClientConfig configures a Client. The zero value of each optional field
// selects the default documented on it.
type ClientConfig struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://localhost:11434/v1 (Ollama). Required; must be an absolute http or
	// https URL.
	BaseURL string
	// APIKey is sent as a bearer token. Empty sends no Authorization header,
	// which local servers accept.
	APIKey string
	// Model is the chat model used when Request.Model is empty. Required.
	Model string
	// EmbeddingModel is the model Embed uses. Default DefaultEmbeddingModel.
	EmbeddingModel string
	// Timeout bounds each HTTP attempt, not the whole call (the ctx does
	// that). Zero means HTTPClient's own Timeout when it has one, else
	// DefaultTimeout. Negative is an error.
	Timeout time.Duration
	// MaxRetries is how many times a call is retried after its first attempt
	// on 429, 5xx, network errors and per-attempt timeouts. Zero means
	// DefaultMaxRetries; negative means no retries.
	MaxRetries int
	// MinBackoff is the first wait between attempts; it doubles on each retry
	// and is jittered down by up to half. Default DefaultMinBackoff.
	MinBackoff time.Duration
	// MaxBackoff caps both the backoff and a server's Retry-After. Default
	// DefaultMaxBackoff; must not be below MinBackoff.
	MaxBackoff time.Duration
	// HTTPClient, when set, supplies the transport, cookie jar and redirect
	// policy. NewClient uses a copy, so the caller's client is never
	// modified; the copy's Timeout is replaced by Timeout when Timeout is
	// set. Default: a new http.Client over http.DefaultTransport.
	HTTPClient *http.Client
}

// Client talks to an OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, the
// llama.cpp server). It implements Chatter and Embedder. Every failure it
// returns is an *Error whose code says what went wrong and which unwraps to
// the cause: a go-openai *openai.APIError or *openai.RequestError, a net
// error, or a context error. When ctx ends before an attempt is answered,
// the error has CodeTimeout; when it ends while waiting to retry, the error
// keeps the code of the failure being retried. Both wrap ctx.Err().
//
// A Client is safe for concurrent use. It holds no connections of its own
// beyond the HTTP client's pool, so it needs no Close.
type Client struct {
	api        *openai.Client
	model      string
	embedModel string
	maxRetries int
	minBackoff time.Duration
	maxBackoff time.Duration
	// sleep waits between attempts and must return early with ctx.Err()
	// when ctx is done. Tests replace it to run without real waits.
	sleep func(ctx context.Context, d time.Duration) error
}

var (
	_ Chatter  = (*Client)(nil)
	_ Embedder = (*Client)(nil)
)

// NewClient validates cfg, applies its defaults and returns a Client. An
// error names the offending field.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("llm: ClientConfig.BaseURL is required")
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm: ClientConfig.BaseURL %q is not an absolute http(s) URL", cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, errors.New("llm: ClientConfig.Model is required")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("llm: ClientConfig.Timeout %v is negative", cfg.Timeout)
	}
	if cfg.MinBackoff < 0 {
		return nil, fmt.Errorf("llm: ClientConfig.MinBackoff %v is negative", cfg.MinBackoff)
	}
	if cfg.MaxBackoff < 0 {
		return nil, fmt.Errorf("llm: ClientConfig.MaxBackoff %v is negative", cfg.MaxBackoff)
	}
	c := &Client{
		model:      cfg.Model,
		embedModel: cmp.Or(cfg.EmbeddingModel, DefaultEmbeddingModel),
		maxRetries: cfg.MaxRetries,
		minBackoff: cmp.Or(cfg.MinBackoff, DefaultMinBackoff),
		maxBackoff: cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff),
		sleep:      sleepCtx,
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	if c.minBackoff > c.maxBackoff {
		return nil, fmt.Errorf("llm: ClientConfig.MinBackoff %v exceeds MaxBackoff %v", c.minBackoff, c.maxBackoff)
	}

	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = recordingDoer{httpClient(cfg)}
	c.api = openai.NewClientWithConfig(oc)
	return c, nil
}

// httpClient returns a copy of cfg.HTTPClient, or a new client, with the
// per-attempt timeout of cfg applied.
func httpClient(cfg ClientConfig) *http.Client {
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	switch {
	case cfg.Timeout > 0:
		hc.Timeout = cfg.Timeout
	case hc.Timeout == 0:
		// go-openai's default client has no timeout; a hung server would
		// otherwise hold a tick until its ctx expires.
		hc.Timeout = DefaultTimeout
	}
	return hc
}

// BorrowsMessages marks that Chat keeps nothing of req.Messages once it
// returns (see MessagesBorrower): the request sent is a copy.
func (c *Client) BorrowsMessages() {}

// Chat runs one chat completion. Request.Model defaults to ClientConfig.Model
// and Request.Task is ignored. Transient failures (429, 5xx, network errors,
// per-attempt timeouts) are retried as configured; the ctx bounds the whole
// call, waits included.
//
// Tool-call arguments are returned exactly as the model wrote them, even
// when they are not valid JSON: validating them is the caller's job. A tool
// call without a function name fails with CodeBadToolCall; the Response is
// then returned alongside the error so the caller can show the model its
// mistake. A response without choices fails with CodeBadResponse.
func (c *Client) Chat(ctx context.Context, req Request) (Response, error) {
	creq := c.chatRequest(req)
	cresp, err := withRetry(ctx, c, func(ctx context.Context) (openai.ChatCompletionResponse, error) {
		return c.api.CreateChatCompletion(ctx, creq)
	})
	if err != nil {
		return Response{}, err
	}
	if len(cresp.Choices) == 0 {
		return Response{}, &Error{Code: CodeBadResponse, StatusCode: http.StatusOK, Err: errors.New("response has no choices")}
	}
	choice := cresp.Choices[0]
	resp := Response{
		Message: Message{
			Role:    cmp.Or(choice.Message.Role, RoleAssistant),
			Content: choice.Message.Content,
			Name:    choice.Message.Name,
		},
		Usage: Usage{
			PromptTokens:     cresp.Usage.PromptTokens,
			CompletionTokens: cresp.Usage.CompletionTokens,
		},
		FinishReason: string(choice.FinishReason),
	}
	for i, tc := range choice.Message.ToolCalls {
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, ToolCall{
			ID:        tc.ID,
			Name:      tc.Function.Name,
			Arguments: tc.Function.Arguments,
		})
		if tc.Function.Name == "" {
			err = &Error{Code: CodeBadToolCall, StatusCode: http.StatusOK,
				Err: fmt.Errorf("tool call %d (id %q) has no function name", i, tc.ID)}
		}
	}
	return resp, err
}

// chatRequest maps a Request onto go-openai's wire type.
func (c *Client) chatRequest(req Request) openai.ChatCompletionRequest {
	creq := openai.ChatCompletionRequest{
		Model:    cmp.Or(req.Model, c.model),
		Messages: make([]openai.ChatCompletionMessage, 0, len(req.Messages)),
	}
	for _, m := range req.Messages {
		cm := openai.ChatCompletionMessage{
			Role:       m.Role,
			Content:    m.Content,
			Name:       m.Name,
			ToolCallID: m.ToolCallID,
		}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, openai.ToolCall{
				ID:       tc.ID,
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		creq.Messages = append(creq.Messages, cm)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			// Some servers reject a function whose parameters are null.
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		creq.Tools = append(creq.Tools, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name:        t.Name,
				Description: t.Description,
				Parameters:  params,
			},
		})
	}
	if req.MaxTokens > 0 {
		// Reasoning models refuse max_tokens (go-openai rejects it before
		// sending); every other OpenAI-compatible server understands it,
		// while max_completion_tokens is newer and not universal.
		if usesCompletionTokens(creq.Model) {
			creq.MaxCompletionTokens = req.MaxTokens
		} else {
			creq.MaxTokens = req.MaxTokens
		}
	}
	if len(req.JSONSchema) > 0 {
		creq.ResponseFormat = &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:   cmp.Or(req.SchemaName, DefaultSchemaName),
				Schema: req.JSONSchema,
				Strict: false,
			},
		}
	}
	return creq
}

// usesCompletionTokens reports whether model belongs to a family that takes
// max_completion_tokens instead of max_tokens; the prefixes are those
// go-openai's reasoning validator checks.
func usesCompletionTokens(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// Embed returns one vector per text, in the order of texts, using
// ClientConfig.EmbeddingModel. Texts are sent in batches of at most
// EmbedBatchSize; each batch is retried like Chat, and the first batch that
// fails ends the call with its error. Empty texts returns nil, nil.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	out := make([][]float32, len(texts))
	for start := 0; start < len(texts); start += EmbedBatchSize {
		batch := texts[start:min(start+EmbedBatchSize, len(texts))]
		ereq := openai.EmbeddingRequestStrings{Input: batch, Model: openai.EmbeddingModel(c.embedModel)}
		eresp, err := withRetry(ctx, c, func(ctx context.Context) (openai.EmbeddingResponse, error) {
			return c.api.CreateEmbeddings(ctx, ereq)
		})
		if err != nil {
			return nil, err
		}
		if len(eresp.Data) != len(batch) {
			return nil, &Error{Code: CodeBadResponse, StatusCode: http.StatusOK,
				Err: fmt.Errorf("embeddings: got %d vectors for %d texts", len(eresp.Data), len(batch))}
		}
		for _, d := range eresp.Data {
			// Servers may answer out of order; index says which input a
			// vector belongs to.
			if d.Index < 0 || d.Index >= len(batch) || out[start+d.Index] != nil {
				return nil, &Error{Code: CodeBadResponse, StatusCode: http.StatusOK,
					Err: fmt.Errorf("embeddings: bad or repeated index %d in a batch of %d", d.Index, len(batch))}
			}
			if d.Embedding == nil {
				d.Embedding = []float32{}
			}
			out[start+d.Index] = d.Embedding
		}
	}
	return out, nil
}

// exchange records what the server answered to one HTTP attempt, because
// go-openai's errors carry neither Retry-After nor, for body read errors,
// the status.
type exchange struct {
	status     int
	retryAfter string
}

type exchangeKey struct{}

// recordingDoer fills the *exchange carried in a request's context. Each
// attempt gets its own exchange and go-openai calls Do synchronously, so no
// locking is needed.
type recordingDoer struct{ hc *http.Client }

func (d recordingDoer) Do(r *http.Request) (*http.Response, error) {
	// go-openai builds a fresh request per attempt, so setting a header
	// here touches no caller's request. Endpoints' operators see which npcd
	// calls them.
	r.Header.Set("User-Agent", version.UserAgent())
	resp, err := d.hc.Do(r)
	if resp != nil {
		if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
			x.status = resp.StatusCode
			x.retryAfter = resp.Header.Get("Retry-After")
		}
	}
	return resp, err
}

// overflowPhrases are how servers word a prompt that does not fit the
// context window, lowercased: OpenAI and vLLM ("This model's maximum
// context length is…"), llama.cpp ("request (N tokens) exceeds the
// available context size", type exceed_context_size_error), Ollama ("the
// input length exceeds the context length"), Hugging Face TGI and
// Anthropic's compatibility layer.
var overflowPhrases = []string{
	"context_length_exceeded",
	"maximum context length",
	"context length exceeded",
	"exceeds the available context size",
	"exceed_context_size",
	"exceeds the context length",
	"`inputs` tokens + `max_new_tokens` must be",
	"prompt is too long",
	"exceed context limit",
}

func isOverflowText(s string) bool {
	s = strings.ToLower(s)
	for _, p := range overflowPhrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// classify turns the error of one attempt into an *Error and says whether
// another attempt could succeed.
func classify(ctx context.Context, err error, x *exchange) (e *Error, retry bool) {
	e = &Error{Err: err, StatusCode: x.status, RetryAfter: parseRetryAfter(x.retryAfter, time.Now())}
	// A server's answer is classified on its own merits even when ctx ended
	// meanwhile; withRetry does not retry once ctx is done.
	var (
		apiErr *openai.APIError
		reqErr *openai.RequestError
		text   string
	)
	switch {
	case errors.As(err, &apiErr):
		e.StatusCode = apiErr.HTTPStatusCode
		code, _ := apiErr.Code.(string)
		text = code + " " + apiErr.Type + " " + apiErr.Message
	case errors.As(err, &reqErr):
		e.StatusCode = reqErr.HTTPStatusCode
		text = string(reqErr.Body)
	}
	if apiErr != nil || reqErr != nil {
		// Overflow is checked before the status because servers disagree
		// on it (400, 413, 422, even 500), and retrying cannot help.
		if isOverflowText(text) {
			e.Code = CodeOverflow
			return e, false
		}
		e.Code, retry = statusCode(e.StatusCode)
		return e, retry
	}

	if cerr := ctx.Err(); cerr != nil {
		e.Code = CodeTimeout
		if !errors.Is(err, cerr) {
			e.Err = fmt.Errorf("%w (%w)", err, cerr)
		}
		return e, false
	}
	var netErr net.Error
	if (errors.As(err, &netErr) && netErr.Timeout()) || errors.Is(err, context.DeadlineExceeded) {
		// The per-attempt timeout fired while ctx still has time.
		e.Code = CodeTimeout
		return e, true
	}
	var urlErr *url.Error
	if netErr != nil || errors.As(err, &urlErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		e.Code = CodeUnavailable
		return e, true
	}
	if x.status >= 400 {
		// An error answer whose body could not be read.
		e.Code, retry = statusCode(x.status)
		return e, retry
	}
	if x.status != 0 {
		// A 2xx answer whose body go-openai could not decode.
		e.Code = CodeBadResponse
		return e, false
	}
	// Nothing was sent: go-openai refused the request (e.g. a parameter the
	// model does not support, or a schema that is not valid JSON).
	e.Code = CodeBadRequest
	return e, false
}

// statusCode maps an HTTP error status to a code and says whether a retry
// could succeed.
func statusCode(status int) (Code, bool) {
	switch {
	case status == http.StatusTooManyRequests:
		return CodeRateLimit, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return CodeAuth, false
	case status == http.StatusRequestTimeout:
		return CodeTimeout, true
	case status >= 500:
		return CodeUnavailable, true
	default:
		return CodeBadRequest, false
	}
}
