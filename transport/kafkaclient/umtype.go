package kafkaclient

import "github.com/twmb/franz-go/pkg/kmsg"

// UpdateMetadata v8 has a tagged field that kmsg does not model: tag 0,
// Type (int8), from KIP-866. A full UpdateMetadata (type 2) names every
// topic, and a broker forgets each topic it caches that the request does
// not name; that is how the controller's catch-up tells a broker about
// topics deleted while it was not listening. The controller's sender
// writes the field and the broker agent reads it with these two; both
// leave it out (type 0, unknown) before v8.
const (
	UpdateMetadataUnknown     int8 = 0
	UpdateMetadataIncremental int8 = 1
	UpdateMetadataFull        int8 = 2
)

const updateMetadataTypeTag = 0

// SetUpdateMetadataType sets the Type of an UpdateMetadata of version 8
// or later; before v8 it does nothing.
func SetUpdateMetadataType(req *kmsg.UpdateMetadataRequest, t int8) {
	if req.Version < 8 || t == UpdateMetadataUnknown {
		return
	}
	req.UnknownTags.Set(updateMetadataTypeTag, []byte{byte(t)})
}

// UpdateMetadataType reads the Type of an UpdateMetadata: unknown before
// v8, when the field is missing, or when it does not hold one byte.
func UpdateMetadataType(req *kmsg.UpdateMetadataRequest) int8 {
	if req.Version < 8 {
		return UpdateMetadataUnknown
	}
	t := UpdateMetadataUnknown
	req.UnknownTags.Each(func(key uint32, val []byte) {
		if key == updateMetadataTypeTag && len(val) == 1 {
			t = int8(val[0])
		}
	})
	return t
}
