// Package journal is the durable, append-only JSONL log under every journal
// of the file store (store/file: the idempotency cache, the approval
// ledger, the messaging dedup ledger, one journal per agent run, the event
// log's segments): one
// implementation of append, fsync, replay, torn-tail recovery and
// compaction.
//
// Every record is one JSON object on one line with a string "key" and an
// "op"; the last record for a key is the key's value, and an op of
// "tombstone" deletes it. Records superseded or deleted are dead; when dead
// records outnumber live ones the file is rewritten with the live ones only:
// a snapshot taken under the lock is written to a temp file outside it, while
// Get and Append go on; the records appended meanwhile are carried over to
// the new file before it is renamed over the old one. A failed compaction is
// counted (car_journal_compaction_failures_total) and logged (WithErrorLog).
//
// A power loss can damage the last write only (the one not yet fsynced), or
// after Write the writes since the last fsync: the file may end inside
// them, and their lost pages read as zero bytes. Replay cuts
// such a torn tail off (scan.go, tornTail); an unreadable line anywhere
// else refuses the open. The format has no checksum: a zero byte is never
// JSON, and a file system that keeps what was fsynced leaves no other
// damage.
//
// With AppendOnly the journal is a log instead (the event log's segments):
// every record stays, none is kept in memory, nothing is compacted. Such a
// log also takes AppendLines: records its caller encoded itself, as one
// buffer of lines written as they are, without reading their JSON again
// (Append reads each record for its key and copies it); only what needs
// no parse is checked (whole lines, each between braces, no zero byte).
// WriteLines is AppendLines without the fsync (the event log's writes
// ahead of a reply's fsync); after it, an append-only journal asks the
// kernel to start writing the lines to the disk (sync_file_range on
// Linux), so that the fsync that follows has less left to wait for.
//
// Append returns only after its record is on disk (fsync). An appender
// that finds the journal idle writes and fsyncs its record itself;
// appends that arrive while a write is on its way queue for the flusher
// goroutine, which writes all of them with one write and one fsync (group
// commit). Write is Append without the fsync (a process crash keeps the
// record, a power loss may not), and Sync flushes what Write left: the
// idempotency journal under journal_sync = proposal.
package journal
