package main

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// Where the admin commands send their requests, as Kafka's tools do:
// with --bootstrap, to a broker, which answers Metadata from its cache and
// forwards what only the controller answers (kafkaclient.Controller
// settles on the broker the brokers name as controller); with
// --bootstrap-controller (KIP-919), to the active controller voter itself,
// found through the voters given. Either way every request goes on one
// connection of its own, and reads see every change already answered
// (the cluster's read-your-writes guarantee).

func (c *cli) seeds() ([]string, error) {
	var seeds []string
	flag := "--bootstrap"
	if !c.viaBrokers {
		flag = "--bootstrap-controller"
	}
	for _, s := range strings.Split(c.bootstrap, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, usageErr("%s %q is not host:port", flag, s)
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, usageErr("%s is empty", flag)
	}
	return seeds, nil
}

// controller is the connection to the active controller, found through
// the seeds (see kafkaclient.Controller). Every connection logs in,
// right after ApiVersions; a refused login or a missing client
// certificate ends the search at once (permanent).
func (c *cli) controller() (*kafkaclient.Controller, error) {
	if c.ctl != nil {
		return c.ctl, nil
	}
	seeds, err := c.seeds()
	if err != nil {
		return nil, err
	}
	opts := kafkaclient.Options{ClientID: "ctrlnode-admin", DialTimeout: min(c.timeout, 10*time.Second)}
	if opts.Dial, err = c.tlsDialer(); err != nil {
		return nil, err
	}
	if opts.SASL, err = c.saslMechanism(); err != nil {
		return nil, err
	}
	c.ctl = kafkaclient.NewController(kafkaclient.ControllerConfig{Bootstrap: seeds, Options: opts, Permanent: c.permanent})
	return c.ctl, nil
}

// toController sends req to the active controller on a connection of its
// own, retrying while no controller is known (an election) and after an
// answer saying NOT_CONTROLLER, until ctx ends; check inspects the answer
// and returns an error wrapping kafkaclient.ErrNotController to have it
// sent again to the active controller found anew.
func (c *cli) toController(ctx context.Context, req kmsg.Request, check func(kmsg.Response) error) (kmsg.Response, error) {
	ctl, err := c.controller()
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	return ctl.Do(ctx, req, check)
}

// clusterView is DescribeCluster as the active controller answered it.
type clusterView struct {
	brokers, voters []clusterNode
	controller      int32
	clusterID       string
}

// cluster returns the cluster as the active controller describes it:
// the voters with the active one as controller (endpoint type 2) and the
// data brokers, fenced ones included (type 1), in id order. Through
// brokers (--bootstrap) the voters are not listed: a broker answers the
// controllers' list with MISMATCHED_ENDPOINT_TYPE, as Kafka's do.
func (c *cli) cluster(ctx context.Context) (clusterView, error) {
	get := func(endpointType int8) (*kmsg.DescribeClusterResponse, error) {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = endpointType
		req.IncludeFencedBrokers = true
		r, err := c.toController(ctx, req, func(r kmsg.Response) error {
			if err := kerr.ErrorForCode(r.(*kmsg.DescribeClusterResponse).ErrorCode); err != nil {
				return fmt.Errorf("DescribeCluster: %w", err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return r.(*kmsg.DescribeClusterResponse), nil
	}
	ctrl := kmsg.NewPtrDescribeClusterResponse()
	ctrl.ControllerID = -1
	if !c.viaBrokers {
		var err error
		if ctrl, err = get(2); err != nil {
			return clusterView{}, err
		}
	}
	all, err := get(1)
	if err != nil {
		return clusterView{}, err
	}
	v := clusterView{controller: ctrl.ControllerID, clusterID: all.ClusterID}
	isVoter := map[int32]bool{}
	for _, b := range ctrl.Brokers {
		isVoter[b.NodeID] = true
		v.voters = append(v.voters, clusterNode{ID: b.NodeID, Host: b.Host, Port: b.Port})
	}
	for _, b := range all.Brokers {
		if isVoter[b.NodeID] {
			continue
		}
		n := clusterNode{ID: b.NodeID, Host: b.Host, Port: b.Port, Fenced: b.IsFenced}
		if b.Rack != nil {
			n.Rack = *b.Rack
		}
		v.brokers = append(v.brokers, n)
	}
	sort.Slice(v.brokers, func(i, j int) bool { return v.brokers[i].ID < v.brokers[j].ID })
	sort.Slice(v.voters, func(i, j int) bool { return v.voters[i].ID < v.voters[j].ID })
	return v, nil
}
