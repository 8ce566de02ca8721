package configmodel

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeOptions are a DescribeConfigs resource's options.
type DescribeOptions struct {
	// Names are the configs asked for; none (nil or empty) asks for
	// every one, as in Kafka. Names the resource does not have are left
	// out.
	Names []string
	// Synonyms lists every level that sets each config (v1+).
	Synonyms bool
	// Documentation adds each config's documentation (v3+).
	Documentation bool
}

func (o DescribeOptions) wants(name string) bool {
	if len(o.Names) == 0 {
		return true
	}
	for _, n := range o.Names {
		if n == name {
			return true
		}
	}
	return false
}

// DescribeTopic describes every topic config (or those asked for) of a
// topic whose own configs are lv.Topic, resolved over lv.
func DescribeTopic(lv Levels, opts DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for i := range topicDefs {
		d := &topicDefs[i]
		if !opts.wants(d.Name) {
			continue
		}
		r, _ := ResolveTopic(d.Name, lv)
		out = append(out, entry(r, false, opts))
	}
	return out
}

// BrokerFacts are what a broker is rather than what it is configured
// with: its read-only configs, described as STATIC_BROKER_CONFIG.
type BrokerFacts struct {
	ID   int32
	Rack string
	// Listeners are its advertised listeners as Kafka writes them
	// (NAME://host:port, comma-separated); empty if not known.
	Listeners string
}

// DescribeBroker describes the configs of broker facts.ID: every broker
// config the cluster knows (or those asked for), resolved over the
// broker's dynamic configs, the cluster-wide default and static, the
// broker's own facts for the read-only ones. static is the static
// settings of the node describing: the broker's own when it answers for
// itself.
func DescribeBroker(facts BrokerFacts, dyn Dynamic, static map[string]string, opts DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	lv := Levels{Broker: itoa(facts.ID), Dynamic: dyn, Static: static}
	own := map[string]string{"broker.id": itoa(facts.ID), "node.id": itoa(facts.ID)}
	if facts.Rack != "" {
		own["broker.rack"] = facts.Rack
	}
	if facts.Listeners != "" {
		own["advertised.listeners"] = facts.Listeners
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for i := range brokerDefs {
		d := &brokerDefs[i]
		if !opts.wants(d.Name) {
			continue
		}
		r, _ := ResolveBroker(d.Name, lv)
		if v, ok := own[d.Name]; ok {
			r.Value, r.Null, r.Source = v, false, kmsg.ConfigSourceStaticBrokerConfig
			r.Synonyms = append([]Synonym{{Name: d.Name, Value: v, Source: kmsg.ConfigSourceStaticBrokerConfig}}, r.Synonyms...)
		}
		out = append(out, entry(r, d.Scope == ReadOnly, opts))
	}
	return out
}

// DescribeClusterDefault describes the cluster-wide default broker
// resource (the empty name): only the configs set there, as Kafka
// answers for it.
func DescribeClusterDefault(dyn Dynamic, opts DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	if dyn == nil {
		return out
	}
	for i := range brokerDefs {
		d := &brokerDefs[i]
		if d.Scope == ReadOnly || !opts.wants(d.Name) {
			continue
		}
		v, ok := dyn.Config("", d.Name)
		if !ok {
			continue
		}
		s := Synonym{Name: d.Name, Value: v, Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig}
		out = append(out, entry(Resolved{Def: *d, Value: v, Source: s.Source, Synonyms: []Synonym{s}}, false, opts))
	}
	return out
}

func entry(r Resolved, readOnly bool, opts DescribeOptions) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = r.Def.Name
	c.Value = value(r.Value, r.Null || r.Def.Sensitive)
	c.ReadOnly = readOnly
	c.IsDefault = r.Source == kmsg.ConfigSourceDefaultConfig
	c.Source = r.Source
	c.IsSensitive = r.Def.Sensitive
	c.ConfigType = r.Def.Type
	if opts.Documentation {
		doc := r.Def.Doc
		c.Documentation = &doc
	}
	if opts.Synonyms {
		for _, s := range r.Synonyms {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = s.Name, value(s.Value, s.Null || r.Def.Sensitive), s.Source
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
	}
	return c
}

func value(v string, null bool) *string {
	if null {
		return nil
	}
	return &v
}

// OverlayStatic puts a broker's static settings into entries described
// without them (static nil), as a broker agent does with the description
// of its own resource it got from the controller, which has the dynamic
// levels but not the broker's settings: an entry no dynamic level sets
// takes the static value (source STATIC_BROKER_CONFIG), and the static
// level joins the synonyms above the default. Entries are changed in
// place; those static does not name are left as they are.
func OverlayStatic(entries []kmsg.DescribeConfigsResponseResourceConfig, static map[string]string) {
	for i := range entries {
		e := &entries[i]
		v, ok := static[e.Name]
		if !ok {
			continue
		}
		if e.Source == kmsg.ConfigSourceDefaultConfig {
			val := v
			e.Value, e.Source, e.IsDefault = &val, kmsg.ConfigSourceStaticBrokerConfig, false
		}
		if len(e.ConfigSynonyms) == 0 {
			continue
		}
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		val := v
		syn.Name, syn.Value, syn.Source = e.Name, &val, kmsg.ConfigSourceStaticBrokerConfig
		at := len(e.ConfigSynonyms)
		for j, s := range e.ConfigSynonyms {
			if s.Source == kmsg.ConfigSourceDefaultConfig {
				at = j
				break
			}
		}
		e.ConfigSynonyms = append(e.ConfigSynonyms[:at:at], append([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{syn}, e.ConfigSynonyms[at:]...)...)
	}
}
