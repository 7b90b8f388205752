// Package translate holds the canonical model that every protocol package
// codes against: an Exchange of work, the Events it produces, the Parts those
// events carry, the States an exchange moves through and the Commands a
// client can give.
//
// The data flow of the bridge is
//
//	client ─(A)─▶ downstream: decode A ─▶ Request ─▶ upstream: encode B ─(B)─▶ agent
//	client ◀(A)── downstream: encode A ◀─ Events  ◀─ upstream: decode B ◀(B)── agent
//
// and this package is the middle of it. It imports no HTTP library; the
// protocol packages under it (agentapi, aip, agentprotocol) are pure
// functions over bytes.
//
// # Lossless passthrough
//
// Every Event and Message carries Ext: the fields of its origin protocol that
// the model does not name, as a raw JSON object, tagged with the protocol
// name. An encoder of the same protocol splices them back, so an exchange that
// enters and leaves in one protocol loses nothing; encoders of other
// protocols ignore them.
//
// # Ownership
//
// An Event returned by a Stream is owned by the caller until it calls Next
// again: a consumer that keeps an event past that point calls Clone. Byte
// slices inside events (Ext, Data, Usage) are never modified in place by the
// bridge once an event is emitted.
package translate
