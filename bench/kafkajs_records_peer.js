// Decode a file of record batches (back to back, as a log segment holds them) with kafkajs 2.2.4's
// own decoders, on the same bytes as the Python side; prints JSON with the best time of the runs
// and a summary to check the result by.
//   node bench/kafkajs_records_peer.js NODE_MODULES FORMAT FILE SECONDS
// FORMAT: "batches" (magic 2, recordBatch/v0/decoder, batch by batch as kafkajs's Fetch v4+
// reads them) or "messages" (magic 0/1, messageSet/decoder, the whole file as one message set).
// gzip is kafkajs's own; snappy, lz4 and zstd come from plugins, registered when they load.
// Runs until SECONDS have passed and at least three times; only the decoding is timed.
const path = require('path')
const fs = require('fs')

const [modules, format, file, secondsText] = process.argv.slice(2)
const kafkajs = path.join(modules, 'kafkajs')
const { CompressionTypes, CompressionCodecs } = require(kafkajs)
const Decoder = require(path.join(kafkajs, 'src/protocol/decoder'))
const RecordBatchDecoder = require(path.join(kafkajs, 'src/protocol/recordBatch/v0/decoder'))
const MessageSetDecoder = require(path.join(kafkajs, 'src/protocol/messageSet/decoder'))

// the factories kafkajs's codec table holds, as each plugin's README registers it
const PLUGINS = {
  snappy: [CompressionTypes.Snappy, () => require(path.join(modules, 'kafkajs-snappy'))],
  lz4: [CompressionTypes.LZ4, () => new (require(path.join(modules, 'kafkajs-lz4')))().codec],
  zstd: [CompressionTypes.ZSTD, () => require(path.join(modules, '@kafkajs/zstd'))()],
}
const plugins = {}
for (const [name, [type, load]] of Object.entries(PLUGINS)) {
  try {
    CompressionCodecs[type] = load()
    plugins[name] = true
  } catch (e) {
    plugins[name] = String(e.message || e).split('\n')[0]
  }
}

// what a consumer reads of each record: key, value and every header value
function touch(summary, key, value, headers) {
  summary.records += 1
  summary.key_bytes += key ? key.length : 0
  summary.value_bytes += value ? value.length : 0
  for (const k of Object.keys(headers || {})) {
    for (const v of [].concat(headers[k])) {
      summary.headers += 1
      summary.header_bytes += v ? v.length : 0
    }
  }
}

// the same check kafkajs's Fetch v4+ makes before each batch (decodeMessages.js)
const RECORD_BATCH_OVERHEAD = 49

async function decodeBatches(buffer, summary) {
  const decoder = new Decoder(buffer)
  while (decoder.canReadBytes(RECORD_BATCH_OVERHEAD)) {
    const batch = await RecordBatchDecoder(decoder)
    summary.batches += 1
    for (const r of batch.records) {
      touch(summary, r.key, r.value, r.headers)
      summary.last_offset = r.offset
    }
  }
}

async function decodeMessages(buffer, summary) {
  const messages = await MessageSetDecoder(new Decoder(buffer), buffer.length)
  for (const m of messages) {
    touch(summary, m.key, m.value, null)
    summary.last_offset = m.offset
  }
}

async function main() {
  const buffer = fs.readFileSync(file)
  const budget = parseFloat(secondsText)
  const decode = { batches: decodeBatches, messages: decodeMessages }[format]
  if (!decode) throw new Error(`unknown format ${format}`)
  let summary = null
  const times = []
  const end = process.hrtime.bigint() + BigInt(Math.round(budget * 1e9))
  while (times.length < 3 || process.hrtime.bigint() < end) {
    const s = { batches: 0, records: 0, key_bytes: 0, value_bytes: 0, headers: 0, header_bytes: 0 }
    const start = process.hrtime.bigint()
    await decode(buffer, s)
    times.push(Number(process.hrtime.bigint() - start) / 1e9)
    summary = s
  }
  const seconds = Math.min(...times)
  const result = { seconds, runs: times.length, bytes: buffer.length, plugins, summary }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch(e => {
  // a codec kafkajs lacks, or bytes it cannot read: the caller reports it
  process.stdout.write(JSON.stringify({ error: String(e.message || e).split('\n')[0], plugins }) + '\n')
  process.exit(1)
})
