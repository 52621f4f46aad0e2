package testserver

import (
	"bytes"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Client is the HTTP client of the helpers: one browser, with a cookie jar (so a
// login it starts is bound to it), a 20 s timeout, and redirects returned to the
// caller rather than followed. NewBrowser makes another.
var Client = NewBrowser()

// NewBrowser returns an HTTP client like Client with a cookie jar of its own: a
// different browser.
func NewBrowser() *http.Client {
	jar, _ := cookiejar.New(nil) // never fails without options
	return &http.Client{
		Jar:     jar,
		Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// PhoneUserAgent is a phone browser's User-Agent: the pages offer it the palm
// app's link (the scan URL) instead of a QR code.
const PhoneUserAgent = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36"

var appLinkRE = regexp.MustCompile(`<a class="applink" id="applink" href="([^"]+)"`)

// AppLink returns the scan URL that a page shown to a phone links to, or "".
func AppLink(page []byte) string {
	m := appLinkRE.FindSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(string(m[1]))
}

// Response is a fully read HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Request describes the request, for failure messages ("POST /v1/...").
	Request string
}

// Do sends a request and reads the whole response. body is sent as is when it
// is a []byte, a string or an io.Reader, as JSON otherwise; nil sends no body.
// A body other than nil gets Content-Type: application/json unless headers set
// one. headers are name, value pairs; a value "" removes the header (to send a
// body without Content-Type, pass "Content-Type", ""). Transport errors fail
// the test.
func Do(t testing.TB, method, url string, body any, headers ...string) *Response {
	t.Helper()
	return DoWith(t, Client, method, url, body, headers...)
}

// DoWith is Do with another client (another browser, see NewBrowser).
func DoWith(t testing.TB, client *http.Client, method, url string, body any, headers ...string) *Response {
	t.Helper()
	if len(headers)%2 != 0 {
		t.Fatalf("Do: headers must be name, value pairs: %q", headers)
	}
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = strings.NewReader(b)
	case io.Reader:
		r = b
	default:
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("Do: encoding the request body: %v", err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: data, Request: method + " " + url}
	recordSecrets(req.URL.Host, body, out) // for the log capture (leaks.go)
	return out
}

// DoJSON sends a request as Do does and decodes the response as a JSON object;
// a body that is not one fails the test.
func DoJSON(t testing.TB, method, url string, body any, headers ...string) (int, map[string]any) {
	t.Helper()
	resp := Do(t, method, url, body, headers...)
	return resp.Status, resp.Object(t)
}

// Object decodes the body as a JSON object, failing the test if it is not one.
func (r *Response) Object(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := r.decode(&m); err != nil || m == nil {
		t.Fatalf("%s: status %d, want a JSON object body: %v\nbody: %s", r.Request, r.Status, err, Snippet(r.Body))
	}
	return m
}

// Array decodes the body as a JSON array, failing the test if it is not one.
func (r *Response) Array(t testing.TB) []any {
	t.Helper()
	var a []any
	if err := r.decode(&a); err != nil || a == nil {
		t.Fatalf("%s: status %d, want a JSON array body: %v\nbody: %s", r.Request, r.Status, err, Snippet(r.Body))
	}
	return a
}

// Decode decodes the body as JSON into v, failing the test on error.
func (r *Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := r.decode(v); err != nil {
		t.Fatalf("%s: status %d, decoding the JSON body: %v\nbody: %s", r.Request, r.Status, err, Snippet(r.Body))
	}
}

func (r *Response) decode(v any) error {
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return io.ErrUnexpectedEOF // data after the JSON value
	}
	return nil
}

// ExpectStatus fails the test unless the response has status want.
func (r *Response) ExpectStatus(t testing.TB, want int) *Response {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: status %d, want %d\nbody: %s", r.Request, r.Status, want, Snippet(r.Body))
	}
	return r
}

// ExpectError checks an error response of the /v1 API: the status, a JSON
// Content-Type, and a body {"error": non-empty, "code": code, ...}. When field
// is not empty, details.field must equal it. It reports mismatches with
// t.Errorf and returns the decoded body (nil if it is not a JSON object).
func (r *Response) ExpectError(t testing.TB, status int, code, field string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: status %d, want %d (code %q)\nbody: %s", r.Request, r.Status, status, code, Snippet(r.Body))
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", r.Request, ct)
	}
	var m map[string]any
	if err := r.decode(&m); err != nil || m == nil {
		t.Errorf("%s: error body is not a JSON object: %v\nbody: %s", r.Request, err, Snippet(r.Body))
		return nil
	}
	if msg, _ := m["error"].(string); msg == "" {
		t.Errorf("%s: error body has no \"error\" message: %s", r.Request, Snippet(r.Body))
	}
	if got, _ := m["code"].(string); got != code {
		t.Errorf("%s: code %q, want %q\nbody: %s", r.Request, got, code, Snippet(r.Body))
	}
	if field != "" {
		details, _ := m["details"].(map[string]any)
		if got, _ := details["field"].(string); got != field {
			t.Errorf("%s: details.field %q, want %q\nbody: %s", r.Request, got, field, Snippet(r.Body))
		}
	}
	return m
}

// Snippet returns at most 2 KiB of a body, for failure messages.
func Snippet(b []byte) string {
	const n = 2 << 10
	if len(b) > n {
		return string(b[:n]) + "...(truncated)"
	}
	return string(b)
}
