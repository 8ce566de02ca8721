package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

func runFeatures(args []string, stdout, stderr io.Writer) int {
	return dispatch("features", "Feature levels (metadata.version), like kafka-features.sh.", []subcommand{
		{"describe", "each feature's supported and finalized levels, from the active controller", featuresDescribe},
		{"upgrade", "raise a feature's finalized level (UpdateFeatures)", func(a []string, o, e io.Writer) int {
			return featuresUpdate("upgrade", a, o, e)
		}},
		{"downgrade", "lower a feature's finalized level (refused when records of the higher level may exist)", func(a []string, o, e io.Writer) int {
			return featuresUpdate("downgrade", a, o, e)
		}},
	}, args, stdout, stderr)
}

type featureRow struct {
	Feature       string `json:"feature"`
	SupportedMin  int16  `json:"supported_min"`
	SupportedMax  int16  `json:"supported_max"`
	Finalized     int16  `json:"finalized"`
	FinalizedSeen bool   `json:"-"`
	Epoch         int64  `json:"epoch"`
}

func featuresDescribe(args []string, stdout, stderr io.Writer) int {
	c := newCLI("features describe", "[flags]", `
Describes the feature levels, as kafka-features.sh describe does: for each
feature the range of levels the active controller's build supports, the
finalized level the cluster runs at, and the finalized levels' epoch (the
log index of the last change). metadata.version decides which record
kinds the controllers may write; a cluster whose log was written by a
release from before feature levels is at level 1.`, stdout, stderr)
	if code, done := c.parse(args); done {
		return code
	}
	ctx, cancel := c.context()
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "ctrlnode", "1"
	r, err := c.toController(ctx, req, func(r kmsg.Response) error {
		return kerr.ErrorForCode(r.(*kmsg.ApiVersionsResponse).ErrorCode)
	})
	if err != nil {
		return c.fail(err)
	}
	resp := r.(*kmsg.ApiVersionsResponse)
	rows := map[string]*featureRow{}
	row := func(name string) *featureRow {
		if rows[name] == nil {
			rows[name] = &featureRow{Feature: name, Epoch: resp.FinalizedFeaturesEpoch}
		}
		return rows[name]
	}
	for _, f := range resp.SupportedFeatures {
		fr := row(f.Name)
		fr.SupportedMin, fr.SupportedMax = f.MinVersion, f.MaxVersion
	}
	for _, f := range resp.FinalizedFeatures {
		fr := row(f.Name)
		fr.Finalized, fr.FinalizedSeen = f.MaxVersionLevel, true
	}
	out := make([]featureRow, 0, len(rows))
	for _, n := range sortedKeys(rows) {
		out = append(out, *rows[n])
	}
	if c.json {
		c.printJSON(out)
		return exitOK
	}
	if len(out) == 0 {
		fmt.Fprintf(c.stderr, "ctrlnode %s: the active controller reports no feature levels: it runs a build from before feature levels, at metadata.version 1\n", c.name)
	}
	var table [][]string
	for _, f := range out {
		fin := "-"
		if f.FinalizedSeen {
			fin = strconv.Itoa(int(f.Finalized))
		}
		table = append(table, []string{f.Feature, strconv.Itoa(int(f.SupportedMin)), strconv.Itoa(int(f.SupportedMax)), fin, strconv.FormatInt(f.Epoch, 10)})
	}
	c.table([]string{"FEATURE", "SUPPORTED-MIN", "SUPPORTED-MAX", "FINALIZED", "EPOCH"}, table)
	return exitOK
}

type featureUpdateRow struct {
	Feature string `json:"feature"`
	Level   int16  `json:"level"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
}

func featuresUpdate(mode string, args []string, stdout, stderr io.Writer) int {
	about := `
Raises a feature's finalized level, as kafka-features.sh upgrade does. The
active controller refuses it (INVALID_UPDATE_VERSION, saying why) unless
every voter and every registered broker runs a build that supports the
level: in a rolling upgrade, replace every node first, then upgrade.`
	if mode == "downgrade" {
		about = `
Lowers a feature's finalized level, as kafka-features.sh downgrade does. A
downgrade below a level that changed what is written to the log is
refused, since records or snapshots of that level may exist that a node of
the lower level cannot read (every metadata.version level so far did);
--unsafe asks for the unsafe downgrade, which the controller refuses.`
	}
	c := newCLI("features "+mode, "(--metadata LEVEL | --feature NAME=LEVEL...) [flags]", about, stdout, stderr)
	metadata := c.fs.Int("metadata", 0, "the metadata.version level (this build knows 1 to "+strconv.Itoa(int(rl.LatestLevel))+")")
	var featureFlags listFlag
	c.fs.Var(&featureFlags, "feature", "NAME=LEVEL (repeatable)")
	dryRun := c.fs.Bool("dry-run", false, "have the controller check the update without making it")
	unsafe := false
	if mode == "downgrade" {
		c.fs.BoolVar(&unsafe, "unsafe", false, "ask for an unsafe downgrade")
	}
	if code, done := c.parse(args); done {
		return code
	}
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.TimeoutMillis = c.timeoutMillis()
	req.ValidateOnly = *dryRun
	upgradeType := int8(1)
	if mode == "downgrade" {
		upgradeType = 2
		if unsafe {
			upgradeType = 3
		}
	}
	add := func(name string, level int) error {
		if level < 0 || level > 32767 {
			return usageErr("level %d of %s is out of range", level, name)
		}
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = name, int16(level), upgradeType
		u.AllowDowngrade = mode == "downgrade"
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		return nil
	}
	if *metadata != 0 {
		if err := add(rl.FeatureMetadataVersion, *metadata); err != nil {
			return c.fail(err)
		}
	}
	for _, f := range featureFlags {
		name, lv, ok := strings.Cut(f, "=")
		level, err := strconv.Atoi(lv)
		if !ok || name == "" || err != nil {
			return c.fail(usageErr("--feature %q: want NAME=LEVEL", f))
		}
		if err := add(name, level); err != nil {
			return c.fail(err)
		}
	}
	if len(req.FeatureUpdates) == 0 {
		return c.fail(usageErr("give --metadata LEVEL or --feature NAME=LEVEL"))
	}
	ctx, cancel := c.context()
	defer cancel()
	r, err := c.toController(ctx, req, func(r kmsg.Response) error {
		return kafkaclient.NotController(r.(*kmsg.UpdateFeaturesResponse).ErrorCode)
	})
	if err != nil {
		return c.fail(err)
	}
	resp := r.(*kmsg.UpdateFeaturesResponse)
	var rows []featureUpdateRow
	failed := false
	status := "upgraded"
	if mode == "downgrade" {
		status = "downgraded"
	}
	if *dryRun {
		status = "valid"
	}
	byName := map[string]kmsg.UpdateFeaturesResponseResult{}
	for _, res := range resp.Results {
		byName[res.Feature] = res
	}
	for _, u := range req.FeatureUpdates {
		row := featureUpdateRow{Feature: u.Feature, Level: u.MaxVersionLevel, Status: status}
		code, msg := resp.ErrorCode, resp.ErrorMessage
		if res, ok := byName[u.Feature]; ok && code == 0 {
			code, msg = res.ErrorCode, res.ErrorMessage
		}
		if err := kerr.ErrorForCode(code); err != nil {
			row.Status, row.Error = "refused", itemError(err, deref(msg))
			failed = true
		}
		rows = append(rows, row)
	}
	if c.json {
		c.printJSON(rows)
	} else {
		var table [][]string
		for _, r := range rows {
			table = append(table, []string{r.Feature, strconv.Itoa(int(r.Level)), r.Status, r.Error})
		}
		c.table([]string{"FEATURE", "LEVEL", "STATUS", "ERROR"}, table)
	}
	if failed {
		for _, r := range rows {
			if r.Error != "" {
				fmt.Fprintf(c.stderr, "ctrlnode %s: %s: %s\n", c.name, r.Feature, r.Error)
			}
		}
		return exitFailed
	}
	return exitOK
}
