package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// rawConn is one keep-alive HTTP/1.1 connection of the load generator. It writes
// prepared request bytes and reads just enough of the response to find its end:
// the load generator shares the machine with Caddy, so it must cost as little
// CPU as possible per request (net/http's client costs several times more).
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dial(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, br: bufio.NewReaderSize(c, 16<<10)}, nil
}

func (c *rawConn) Close() error { return c.c.Close() }

// getRequest is a GET of path with a bearer token ("" for none).
func getRequest(host, path, token string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: palmload\r\n", path, host)
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

var errConnClose = errors.New("the server closed the keep-alive connection")

// roundTrip sends req and reads the whole response; it returns the status.
func (c *rawConn) roundTrip(req []byte) (int, error) {
	if _, err := c.c.Write(req); err != nil {
		return 0, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	length, chunked, closing := -1, false, false
	for {
		line, err = c.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		if err := c.skipChunks(); err != nil {
			return 0, err
		}
	case length >= 0:
		if _, err := c.br.Discard(length); err != nil {
			return 0, err
		}
	default:
		return 0, errors.New("response without Content-Length or chunked body")
	}
	if closing {
		return code, errConnClose
	}
	return code, nil
}

func (c *rawConn) skipChunks() error {
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
		if _, err := c.br.Discard(int(n) + 2); err != nil {
			return err
		}
	}
}
