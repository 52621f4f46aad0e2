package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Conn is one keep-alive HTTP/1.1 connection of the load generator. It writes
// prepared request bytes and reads just enough of the response to find its
// end: the load generator shares the machine with the servers it measures, so
// it must cost as little CPU as possible per request (net/http's client costs
// several times more).
type Conn struct {
	c    net.Conn
	br   *bufio.Reader
	body []byte // the last response body, when kept
	// cookie is the name=value of the last kept response's Set-Cookie, or "".
	cookie string
}

// Cookie is the name=value pair of the Set-Cookie header of the last response Do
// read (the first one, if several), or "".
func (c *Conn) Cookie() string { return c.cookie }

// Dial opens a connection to addr (host:port).
func Dial(addr string) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, br: bufio.NewReaderSize(c, 32<<10)}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// GetRequest is a GET of path, with extra header lines ("Name: value").
func GetRequest(host, path string, headers ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", path, host)
	if !slices.ContainsFunc(headers, func(h string) bool { return strings.HasPrefix(strings.ToLower(h), "user-agent:") }) {
		b.WriteString("User-Agent: palmload\r\n")
	}
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// PostRequest is a POST of body with the given Content-Type.
func PostRequest(host, path, contentType string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: palmload\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		path, host, contentType, len(body))
	b.Write(body)
	return b.Bytes()
}

// ErrConnClose is returned, with the status, when the server answered with
// Connection: close: the connection cannot carry another request.
var ErrConnClose = errors.New("the server closed the keep-alive connection")

// RoundTrip sends req and reads the whole response, discarding the body; it
// returns the status.
func (c *Conn) RoundTrip(req []byte) (int, error) {
	code, _, err := c.exchange(req, false)
	return code, err
}

// Do sends req and returns the status, the Location header and the body (valid
// until the next call).
func (c *Conn) Do(req []byte) (code int, location string, body []byte, err error) {
	code, location, err = c.exchange(req, true)
	return code, location, c.body, err
}

func (c *Conn) exchange(req []byte, keep bool) (int, string, error) {
	if _, err := c.c.Write(req); err != nil {
		return 0, "", err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, "", err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, "", fmt.Errorf("bad status line %q", line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, "", fmt.Errorf("bad status line %q", line)
	}
	length, chunked, closing, location := -1, false, false, ""
	if keep {
		c.cookie = ""
	}
	for {
		line, err = c.br.ReadSlice('\n')
		if err != nil {
			return 0, "", err
		}
		if len(line) <= 2 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, "", fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		case keep && bytes.EqualFold(name, []byte("Location")):
			location = string(value)
		case keep && c.cookie == "" && bytes.EqualFold(name, []byte("Set-Cookie")):
			pair, _, _ := bytes.Cut(value, []byte(";"))
			c.cookie = string(pair)
		}
	}
	c.body = c.body[:0]
	switch {
	case chunked:
		if err := c.readChunks(keep); err != nil {
			return 0, "", err
		}
	case length >= 0:
		if keep {
			c.body = append(c.body, make([]byte, length)...)
			if _, err := io.ReadFull(c.br, c.body); err != nil {
				return 0, "", err
			}
		} else if _, err := c.br.Discard(length); err != nil {
			return 0, "", err
		}
	default:
		return 0, "", errors.New("response without Content-Length or chunked body")
	}
	if closing {
		return code, location, ErrConnClose
	}
	return code, location, nil
}

// readChunks reads a chunked body, into c.body when keep is set.
func (c *Conn) readChunks(keep bool) error {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(";"))
		n, err := strconv.ParseInt(string(size), 16, 64)
		if err != nil {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			for { // trailers, then the final CRLF
				if line, err = c.br.ReadSlice('\n'); err != nil || len(line) <= 2 {
					return err
				}
			}
		}
		if keep {
			start := len(c.body)
			c.body = append(c.body, make([]byte, n)...)
			if _, err := io.ReadFull(c.br, c.body[start:]); err != nil {
				return err
			}
			if _, err := c.br.Discard(2); err != nil {
				return err
			}
		} else if _, err := c.br.Discard(int(n) + 2); err != nil {
			return err
		}
	}
}
