package testutil

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
)

// JSONLog is an io.Writer that keeps what a process or a logger writes to
// it and parses its JSON log lines (one object a line), for a test to find,
// wait for or count a message. Any number of goroutines may write and read.
type JSONLog struct {
	mu      sync.Mutex
	text    bytes.Buffer
	partial []byte
	lines   []map[string]any
	grew    chan struct{} // closed and replaced when a line is added
}

func (l *JSONLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text.Write(p)
	l.partial = append(l.partial, p...)
	added := false
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		var m map[string]any
		if json.Unmarshal(l.partial[:i], &m) == nil {
			l.lines = append(l.lines, m)
			added = true
		}
		l.partial = l.partial[i+1:]
	}
	if added && l.grew != nil {
		close(l.grew)
		l.grew = nil
	}
	return len(p), nil
}

// String is everything written so far.
func (l *JSONLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// Lines are the JSON lines written so far.
func (l *JSONLog) Lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.lines...)
}

// Count is how many lines so far have the message msg.
func (l *JSONLog) Count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.lines {
		if m["msg"] == msg {
			n++
		}
	}
	return n
}

// Find returns the first line at index from or later with the message msg
// and the string attributes attrs (key, value pairs), with its index; the
// index is -1 when there is none.
func (l *JSONLog) Find(from int, msg string, attrs ...string) (map[string]any, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line, i, _ := l.findLocked(from, msg, attrs)
	return line, i
}

// Wait is Find that waits for the line, at most timeout and only while
// stopped (the writer's end, such as its process's exit; nil: never) is
// open; the index is -1 when the line did not come.
func (l *JSONLog) Wait(timeout time.Duration, stopped <-chan struct{}, from int, msg string, attrs ...string) (map[string]any, int) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		line, i, grew := l.findLocked(from, msg, attrs)
		l.mu.Unlock()
		if i >= 0 {
			return line, i
		}
		select {
		case <-grew:
		case <-stopped:
			return l.Find(from, msg, attrs...)
		case <-deadline.C:
			return nil, -1
		}
	}
}

// findLocked is Find, and when it finds nothing, the channel closed at the
// next line.
func (l *JSONLog) findLocked(from int, msg string, attrs []string) (map[string]any, int, <-chan struct{}) {
lines:
	for i := max(from, 0); i < len(l.lines); i++ {
		m := l.lines[i]
		if m["msg"] != msg {
			continue
		}
		for a := 0; a+1 < len(attrs); a += 2 {
			if v, ok := m[attrs[a]].(string); !ok || v != attrs[a+1] {
				continue lines
			}
		}
		return m, i, nil
	}
	if l.grew == nil {
		l.grew = make(chan struct{})
	}
	return nil, -1, l.grew
}
