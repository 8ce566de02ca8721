// Package sasl implements the server side of the SASL mechanisms the
// controller's Kafka-protocol listener offers: SCRAM-SHA-256 and
// SCRAM-SHA-512 (RFC 5802, RFC 7677) and PLAIN (RFC 4616). The listener
// hands the auth bytes of each SaslAuthenticate request to a Session and
// returns the Session's reply in the response.
//
// # Who does what
//
// github.com/xdg-go/scram (the SCRAM of the MongoDB Go driver) runs the
// SCRAM exchange: it parses the client's messages, draws the server
// nonce, checks the channel-binding header, the nonce and the proof, signs
// the server-final message, and derives verifiers from passwords
// (NewCredential, and PLAIN's check). This package adapts it: it looks the
// user's verifier up (Lookup), makes one up for an unknown user, enforces
// the parts of RFC 5802's grammar its parser lets through (non-empty UTF-8
// names without NUL, printable nonces, name=value extensions), applies
// Kafka's rules (no channel binding, an authorization id only if it is the
// user name, extensions such as tokenauth ignored) and maps its errors onto
// the ones below, which the listener sends as SASL_AUTHENTICATION_FAILED.
// CredentialFromSaltedPassword derives the keys from a salted password
// itself, as xdg-go starts from the password only.
//
// # Passwords are never stored
//
// The credential store holds salted SCRAM verifiers only (Credential), the
// same material Kafka keeps for a user:
//
//	SaltedPassword = PBKDF2(password, salt, iterations)   with the mechanism's hash
//	ClientKey      = HMAC(SaltedPassword, "Client Key")
//	StoredKey      = H(ClientKey)
//	ServerKey      = HMAC(SaltedPassword, "Server Key")
//
// Neither StoredKey nor ServerKey lets anyone log in: a SCRAM client must
// prove knowledge of ClientKey, which cannot be computed from StoredKey
// (H is one-way), and recovering the password from a stolen verifier costs
// a salted, iterated dictionary attack per user. A leak of the store (a
// snapshot, a backup, a raft log segment) therefore does not leak
// passwords, and the same password used with several mechanisms or
// clusters gets unrelated verifiers because the salts differ.
// AlterUserScramCredentials requests carry a salted password, never the
// password itself; CredentialFromSaltedPassword turns one into a verifier.
//
// # How PLAIN is checked
//
// PLAIN sends the password itself (which is why it is refused on
// connections without TLS). The server checks it against the user's SCRAM
// verifiers: for each verifier it recomputes SaltedPassword with that
// verifier's hash, salt and iteration count, derives ClientKey and then
// StoredKey, and compares the result with the stored StoredKey in constant
// time. Any one verifier that matches authenticates the user, so a user
// needs at least one SCRAM credential (of either mechanism) to log in with
// PLAIN. A user with no verifier still costs one PBKDF2 run, so timing does
// not tell unknown users from wrong passwords.
//
// # Unknown users
//
// Neither mechanism reveals whether a user exists. SCRAM answers the first
// message of an unknown user with a salt and iteration count derived
// deterministically from the user name and a per-process random key, then
// fails the final message exactly as for a wrong password; both failures
// return ErrInvalidCredentials. Malformed messages are reported as such
// (ErrMalformed), which says nothing about the user.
//
// # Limits
//
// Client messages are limited to MaxMessageSize bytes. Iteration counts are
// bounded to [MinIterations, MaxIterations], as Kafka bounds them. Channel
// binding is not supported (Kafka does not support it either): a client
// asking for it ("p=") is refused, while "y" (client could bind but believes
// the server cannot) is accepted. SCRAM extensions such as Kafka's
// tokenauth are parsed and ignored. User names are compared byte for byte;
// no SASLprep normalization is applied, as in Kafka.
//
// A Session serves one exchange on one connection and is not safe for
// concurrent use.
package sasl
