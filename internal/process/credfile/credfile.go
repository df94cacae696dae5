// Package credfile reads the small files a Secret is mounted as: keys, tokens, passwords, a
// webhook URL. Every reader of such a file goes through here, so each is bounded (a wrong path,
// a log or /dev/zero, is never read into memory) and no error ever holds a byte of what was
// read.
//
//	key, err := credfile.Read("/etc/wave/key", 4096, "the key")
package credfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Read returns the file at path, surrounding white space trimmed (a Secret's value often ends
// in a newline). what names the content in errors ("the key"); a file larger than max bytes
// is refused, unread past max.
func Read(path string, max int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("read %s from %s: %w (is the Secret mounted there?)", what, path, errors.Unwrap(err))
		}
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s from %s: %w", what, path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes; is it %s?", path, max, what)
	}
	return []byte(strings.TrimSpace(string(b))), nil
}

// Line is Read for a value that must be one non-empty line: a header value, a user name.
func Line(path string, max int64, what string) (string, error) {
	b, err := Read(path, max, what)
	if err != nil {
		return "", err
	}
	v := string(b)
	if v == "" {
		return "", fmt.Errorf("%s is empty; it must hold %s", path, what)
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("%s holds more than one line; %s must be one line", path, what)
	}
	return v, nil
}
