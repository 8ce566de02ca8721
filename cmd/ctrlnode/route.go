package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// A cluster's broker list names the controller voters and the data
// brokers together. A general Kafka client sends the requests it does
// not route to the controller (Metadata, DescribeCluster, DescribeConfigs,
// IncrementalAlterConfigs) to any of them, and a data broker's agent
// serves none of the admin APIs; a standby voter's image may also be a
// raft heartbeat behind the active one. So reads and config changes go to
// the active controller itself, found through --bootstrap, on a
// connection of their own.

func (c *cli) seeds() ([]string, error) {
	var seeds []string
	for _, s := range strings.Split(c.bootstrap, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, usageErr("--bootstrap %q is not host:port", s)
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, usageErr("--bootstrap is empty")
	}
	return seeds, nil
}

func (c *cli) dial(ctx context.Context, addr string) (*kafkaclient.Conn, error) {
	opts := kafkaclient.Options{ClientID: "ctrlnode-admin", DialTimeout: min(c.timeout, 10*time.Second)}
	dial, err := c.tlsDialer()
	if err != nil {
		return nil, err
	}
	// Every connection logs in, right after ApiVersions.
	if opts.SASL, err = c.saslMechanism(); err != nil {
		return nil, err
	}
	opts.Dial = dial
	return kafkaclient.Dial(ctx, addr, opts)
}

// ask sends req on conn at the highest version both know.
func ask(ctx context.Context, conn *kafkaclient.Conn, req kmsg.Request) (kmsg.Response, error) {
	if err := conn.Pick(req, 0); err != nil {
		return nil, err
	}
	return conn.Request(ctx, req)
}

// clusterView is DescribeCluster as one voter answered it.
type clusterView struct {
	brokers, voters []clusterNode
	controller      int32
	clusterID       string
}

// describeClusterVia asks one voter for the voters (endpoint type 2) and
// for voters and data brokers together (type 1); the difference is the
// data brokers.
func describeClusterVia(ctx context.Context, conn *kafkaclient.Conn) (clusterView, error) {
	get := func(endpointType int8) (*kmsg.DescribeClusterResponse, error) {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = endpointType
		req.IncludeFencedBrokers = true
		r, err := ask(ctx, conn, req)
		if err != nil {
			return nil, err
		}
		resp := r.(*kmsg.DescribeClusterResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, fmt.Errorf("DescribeCluster: %w", err)
		}
		return resp, nil
	}
	ctrl, err := get(2)
	if err != nil {
		return clusterView{}, err
	}
	all, err := get(1)
	if err != nil {
		return clusterView{}, err
	}
	v := clusterView{controller: all.ControllerID, clusterID: all.ClusterID}
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
	return v, nil
}

// controllerConn finds the active controller through the seeds and
// connects to it, retrying while none is known (an election) until ctx
// ends. It returns the cluster as the active controller describes it.
func (c *cli) controllerConn(ctx context.Context) (*kafkaclient.Conn, clusterView, error) {
	seeds, err := c.seeds()
	if err != nil {
		return nil, clusterView{}, err
	}
	var lastErr error
	for {
		for _, s := range seeds {
			conn, err := c.dial(ctx, s)
			if err != nil {
				if err := c.permanent(err); err != nil {
					return nil, clusterView{}, err
				}
				lastErr = err
				continue
			}
			view, err := describeClusterVia(ctx, conn)
			_ = conn.Close()
			if err != nil {
				lastErr = err
				continue
			}
			if view.controller < 0 {
				lastErr = errors.New("no active controller known (an election is under way)")
				continue
			}
			for _, v := range view.voters {
				if v.ID != view.controller {
					continue
				}
				addr := net.JoinHostPort(v.Host, strconv.Itoa(int(v.Port)))
				cc, err := c.dial(ctx, addr)
				if err != nil {
					if err := c.permanent(err); err != nil {
						return nil, clusterView{}, err
					}
					lastErr = fmt.Errorf("active controller %d at %s: %w", v.ID, addr, err)
					break
				}
				// Its own view: a seed may be behind.
				own, err := describeClusterVia(ctx, cc)
				if err != nil {
					_ = cc.Close()
					lastErr = err
					break
				}
				if own.controller != v.ID {
					_ = cc.Close()
					lastErr = fmt.Errorf("voter %d is no longer the active controller", v.ID)
					break
				}
				return cc, own, nil
			}
		}
		select {
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return nil, clusterView{}, fmt.Errorf("%w (%v)", ctx.Err(), lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errRetry marks an answer that says to ask the active controller again.
var errRetry = errors.New("not the active controller")

// toController sends req to the active controller; check inspects the
// answer and returns errRetry (wrapped or not) to have it sent again once
// the active controller is found anew.
func (c *cli) toController(ctx context.Context, req kmsg.Request, check func(kmsg.Response) error) (kmsg.Response, error) {
	for {
		conn, _, err := c.controllerConn(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := ask(ctx, conn, req)
		_ = conn.Close()
		if err == nil && check != nil {
			err = check(resp)
		}
		if err == nil {
			return resp, nil
		}
		if !errors.Is(err, errRetry) && !errors.Is(err, kafkaclient.ErrBroken) && !unreachable(err) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// retryOn turns a NOT_CONTROLLER code into errRetry.
func retryOn(code int16) error {
	if err := kerr.ErrorForCode(code); errors.Is(err, kerr.NotController) {
		return fmt.Errorf("%w: %v", errRetry, err)
	}
	return nil
}
