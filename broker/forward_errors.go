package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorAnswer is req's response with code for everything it names, and
// msg where the response has room for one: what a client gets when its
// forwarded request could not reach the controller.
func errorAnswer(req kmsg.Request, code int16, msg string) kmsg.Response {
	m := &msg
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, t := range req.(*kmsg.CreateTopicsRequest).Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, m
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DeleteTopicsResponse:
		dr := req.(*kmsg.DeleteTopicsRequest)
		for _, name := range dr.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = kmsg.StringPtr(name), code, m
			r.Topics = append(r.Topics, rt)
		}
		for _, t := range dr.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = t.Topic, t.TopicID, code, m
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range req.(*kmsg.CreatePartitionsRequest).Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, m
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DescribeACLsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.CreateACLsResponse:
		for range req.(*kmsg.CreateACLsRequest).Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, m
			r.Results = append(r.Results, res)
		}
	case *kmsg.DeleteACLsResponse:
		for range req.(*kmsg.DeleteACLsRequest).Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, m
			r.Results = append(r.Results, res)
		}
	case *kmsg.DescribeConfigsResponse:
		for _, rr := range req.(*kmsg.DescribeConfigsRequest).Resources {
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceType, res.ResourceName, res.ErrorCode, res.ErrorMessage = rr.ResourceType, rr.ResourceName, code, m
			r.Resources = append(r.Resources, res)
		}
	case *kmsg.AlterConfigsResponse:
		for _, rr := range req.(*kmsg.AlterConfigsRequest).Resources {
			res := kmsg.NewAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName, res.ErrorCode, res.ErrorMessage = rr.ResourceType, rr.ResourceName, code, m
			r.Resources = append(r.Resources, res)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, rr := range req.(*kmsg.IncrementalAlterConfigsRequest).Resources {
			res := kmsg.NewIncrementalAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName, res.ErrorCode, res.ErrorMessage = rr.ResourceType, rr.ResourceName, code, m
			r.Resources = append(r.Resources, res)
		}
	case *kmsg.ElectLeadersResponse:
		r.ErrorCode = code
		for _, t := range req.(*kmsg.ElectLeadersRequest).Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, m
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.AlterPartitionAssignmentsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.ListPartitionReassignmentsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		ar := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
		seen := map[string]bool{}
		add := func(u string) {
			if !seen[u] {
				seen[u] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode, res.ErrorMessage = u, code, m
				r.Results = append(r.Results, res)
			}
		}
		for _, d := range ar.Deletions {
			add(d.Name)
		}
		for _, u := range ar.Upsertions {
			add(u.Name)
		}
	case *kmsg.UpdateFeaturesResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.AddRaftVoterResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.RemoveRaftVoterResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.DescribeQuorumResponse:
		r.ErrorCode = code
		if req.GetVersion() >= 2 {
			r.ErrorMessage = m
		}
	}
	resp.SetVersion(req.GetVersion())
	return resp
}

// refusedChange reports whether resp answers a change (a request that
// alters the cluster) with an error for any of its items: the answer to
// withhold when an earlier attempt of the same request may have been
// applied (see forward).
func refusedChange(resp kmsg.Response) bool {
	var codes []int16
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, x := range r.Topics {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for _, x := range r.Topics {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.CreatePartitionsResponse:
		for _, x := range r.Topics {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.CreateACLsResponse:
		for _, x := range r.Results {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.DeleteACLsResponse:
		for _, x := range r.Results {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.AlterConfigsResponse:
		for _, x := range r.Resources {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, x := range r.Resources {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, x := range r.Results {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.AlterPartitionAssignmentsResponse:
		codes = append(codes, r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	case *kmsg.ElectLeadersResponse:
		codes = append(codes, r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	case *kmsg.UpdateFeaturesResponse:
		codes = append(codes, r.ErrorCode)
		for _, x := range r.Results {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.AddRaftVoterResponse:
		codes = append(codes, r.ErrorCode)
	case *kmsg.RemoveRaftVoterResponse:
		codes = append(codes, r.ErrorCode)
	}
	return slices.ContainsFunc(codes, func(c int16) bool { return c != 0 })
}
