package ndbmemcache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndbgate/ndbgate/gateway"
)

// Metrics of a served role, declared once. Register them where the role is
// served; a Reader without them counts nothing.
type Metrics struct {
	prefixes *prometheus.GaugeVec
	reloads  *prometheus.CounterVec
}

// NewMetrics declares the role's metrics in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		prefixes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ndbgate_ndbmemcache_prefixes",
			Help: "Key prefixes of the served ndbmemcache role: served, or refused (the log says why).",
		}, []string{"state"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ndbgate_ndbmemcache_reloads_total",
			Help: "Reloads of the ndbmemcache role after its update_timestamp changed: ok, or failed (the previous configuration stays).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.prefixes, m.reloads)
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	return m
}

// Serving records the routes now served.
func (m *Metrics) Serving(routes []gateway.Route) {
	if m == nil {
		return
	}
	served, refused := 0, 0
	for _, rt := range routes {
		if rt.Refused != nil {
			refused++
		} else {
			served++
		}
	}
	m.prefixes.WithLabelValues("served").Set(float64(served))
	m.prefixes.WithLabelValues("refused").Set(float64(refused))
}

func (m *Metrics) reloaded(ok bool) {
	if m == nil {
		return
	}
	outcome := "ok"
	if !ok {
		outcome = "failed"
	}
	m.reloads.WithLabelValues(outcome).Inc()
}
