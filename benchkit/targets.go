package benchkit

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Target is one of the figures the controller is held to at large
// sizes, as the run measured it: met, not met, or not measured (a size
// the run did not include).
type Target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Figure string `json:"figure"`
	Status string `json:"status"` // "met", "not met", "not measured"
}

const (
	targetMet         = "met"
	targetNotMet      = "not met"
	targetNotMeasured = "not measured"
)

// The sizes the targets are stated at: 1M partitions over 10 brokers and
// 10M over 100 (a broker leads 100k partitions in both), and 1k for the
// failover reference.
const (
	target1M, target1MBrokers   = 1_000_000, 10
	target10M, target10MBrokers = 10_000_000, 100
	targetSmall                 = 1000
)

func (r Report) result(scenario string, partitions, brokers int) *Result {
	for i := range r.Results {
		res := &r.Results[i]
		if res.Scenario == scenario && res.Partitions == partitions && (brokers == 0 || res.Brokers == brokers) {
			return res
		}
	}
	return nil
}

func (r Report) image(partitions, brokers int) *ImageResult {
	for i := range r.Images {
		if im := &r.Images[i]; im.Partitions == partitions && im.Brokers == brokers {
			return im
		}
	}
	return nil
}

func status(ok bool) string {
	if ok {
		return targetMet
	}
	return targetNotMet
}

// targets checks the report against the targets it has the sizes for.
func targets(r Report) []Target {
	var out []Target
	events := []struct{ scenario, name string }{
		{"controlled shutdown", "controlled shutdown"},
		{"broker failure (fence round)", "fence"},
	}
	for _, ev := range events {
		t := Target{Name: fmt.Sprintf("1M partitions / 10 brokers: %s of a broker leading 100k", ev.name), Want: "<= 300 ms", Status: targetNotMeasured}
		if res := r.result(ev.scenario, target1M, target1MBrokers); res != nil {
			t.Figure = fmt.Sprintf("%.1f ms (%.1f-%.1f, load %s); %.2fx its floor of %.1f ms", res.Value, res.Min, res.Max, loads(res.LoadAvg),
				res.EventRatio, res.ApplyFloorMs+res.CommitFloorMs)
			t.Status = status(res.Value <= 300)
		}
		out = append(out, t)
	}
	im := r.image(target10M, target10MBrokers)
	for _, c := range []struct {
		name, want string
		limit      float64
		value      func(*ImageResult) float64
		unit       string
	}{
		{"10M / 100 brokers: heap per partition per voter", "<= 150 B", 150, func(im *ImageResult) float64 { return im.HeapPerPartition }, "B"},
		{"10M / 100 brokers: snapshot per partition", "<= 20 B", 20, func(im *ImageResult) float64 { return im.SnapshotPerPart }, "B"},
		{"10M / 100 brokers: snapshot written", "<= 3 s", 3000, func(im *ImageResult) float64 { return im.SnapshotWriteMs }, "ms"},
		{"10M / 100 brokers: snapshot restored", "<= 3 s", 3000, func(im *ImageResult) float64 { return im.SnapshotRestoreMs }, "ms"},
	} {
		t := Target{Name: c.name, Want: c.want, Status: targetNotMeasured}
		if im != nil {
			v := c.value(im)
			t.Figure = fmt.Sprintf("%.1f %s (load %s)", v, c.unit, loads(im.LoadAvg))
			if c.unit == "B" && c.limit == 150 {
				t.Figure = fmt.Sprintf("%.1f B of process heap; the image alone, restored: %.1f B", v, im.ImagePerPartition)
			}
			t.Status = status(v <= c.limit)
		}
		out = append(out, t)
	}
	for _, ev := range events {
		t := Target{Name: fmt.Sprintf("10M / 100 brokers: %s of a broker leading 100k", ev.name), Want: "within 10% of 1M / 10 brokers", Status: targetNotMeasured}
		big, small := r.result(ev.scenario, target10M, target10MBrokers), r.result(ev.scenario, target1M, target1MBrokers)
		if big != nil && small != nil && small.Value > 0 {
			t.Figure = fmt.Sprintf("%.1f ms vs %.1f ms: %.2fx", big.Value, small.Value, big.Value/small.Value)
			t.Status = status(big.Value <= small.Value*1.1)
		}
		out = append(out, t)
	}
	t := Target{Name: "failover at 10M / 100 brokers", Want: "within 10% of 1k", Status: targetNotMeasured}
	big := r.result("failover: new leader known -> ready", target10M, target10MBrokers)
	small := r.result("failover: new leader known -> ready", targetSmall, target10MBrokers)
	if small == nil {
		small = r.result("failover: new leader known -> ready", targetSmall, 0)
	}
	if big != nil && small != nil && small.Value > 0 {
		t.Figure = fmt.Sprintf("%.2f ms vs %.2f ms: %.2fx", big.Value, small.Value, big.Value/small.Value)
		t.Status = status(big.Value <= small.Value*1.1)
	}
	out = append(out, t)
	return out
}

// writeTargets prints the targets, if the run measured any of them.
func writeTargets(w io.Writer, ts []Target) {
	measured := false
	for _, t := range ts {
		measured = measured || t.Status != targetNotMeasured
	}
	if !measured {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tWANT\tMEASURED\tSTATUS")
	for _, t := range ts {
		fig := t.Figure
		if fig == "" {
			fig = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Want, fig, t.Status)
	}
	_ = tw.Flush()
}
