// Package limits reports the refusals of a configured limit: each refusal
// is counted in a Prometheus counter (by limit) and logged once per cause,
// so that a caller that hammers a limit fills neither the log nor memory
// (the causes remembered are bounded).
package limits

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// maxCauses bounds the causes remembered as logged.
const maxCauses = 4096

// Refusals counts and logs refusals. Its methods are safe for concurrent
// use; the zero value is not usable: use New.
type Refusals struct {
	counter *prometheus.CounterVec
	log     *slog.Logger
	msg     string

	mu     sync.Mutex
	logged map[[2]string]struct{}
}

// New returns Refusals whose counter is <namespace>_limit_refusals_total,
// labelled by limit; log receives the first refusal of each cause.
func New(namespace string, log *slog.Logger) *Refusals {
	return NewNamed(namespace, "limit_refusals_total", "Requests refused because they would exceed a configured limit, by limit.",
		"limit reached: request refused (logged once per cause)", log)
}

// NewNamed returns Refusals of another kind than a limit (an identity
// check): the counter <namespace>_<name>, labelled by limit (the rule
// refused by), and msg the message of the line logged once per cause.
func NewNamed(namespace, name, help, msg string, log *slog.Logger) *Refusals {
	return &Refusals{
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, []string{"limit"}),
		log:     log,
		msg:     msg,
		logged:  map[[2]string]struct{}{},
	}
}

// Refuse counts one refusal of limit (of value max) and logs it when its
// cause (who or what hit the limit) was not logged before.
func (r *Refusals) Refuse(limit string, max int, cause string, attrs ...any) {
	r.Deny(limit, cause, append([]any{"max", max}, attrs...)...)
}

// Deny counts one refusal by rule and logs it when its cause was not
// logged before.
func (r *Refusals) Deny(rule, cause string, attrs ...any) {
	r.counter.WithLabelValues(rule).Inc()
	k := [2]string{rule, cause}
	r.mu.Lock()
	_, done := r.logged[k]
	full := len(r.logged) >= maxCauses
	if !done && !full {
		r.logged[k] = struct{}{}
	}
	r.mu.Unlock()
	if done || full {
		return
	}
	r.log.Warn(r.msg, append([]any{"limit", rule, "cause", cause}, attrs...)...)
}

// Count is the refusals of limit so far.
func (r *Refusals) Count(limit string) int {
	var m dto.Metric
	if err := r.counter.WithLabelValues(limit).Write(&m); err != nil {
		return 0
	}
	return int(m.GetCounter().GetValue())
}

// Describe implements prometheus.Collector.
func (r *Refusals) Describe(ch chan<- *prometheus.Desc) { r.counter.Describe(ch) }

// Collect implements prometheus.Collector.
func (r *Refusals) Collect(ch chan<- prometheus.Metric) { r.counter.Collect(ch) }
