// Decode one message body again and again with kafkajs 2.2.4's own decoder, on the same bytes
// as the Python side: prints JSON with the time taken and a summary to check the result by.
//   node bench/kafkajs_peer.js NODE_MODULES DECODER BODY_FILE COUNT
// DECODER is a path under kafkajs/src/protocol/requests, e.g. metadata/v1/response.
const path = require('path')
const fs = require('fs')

async function main() {
  const [modules, decoder, file, countText] = process.argv.slice(2)
  const { decode } = require(path.join(modules, 'kafkajs/src/protocol/requests', decoder))
  const body = fs.readFileSync(file)
  const count = parseInt(countText, 10)
  const first = await decode(body)
  const start = process.hrtime.bigint()
  for (let i = 0; i < count; i++) {
    await decode(body)
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  const topics = first.topicMetadata || []
  const summary = {
    topics: topics.length,
    partitions: topics.map(t => t.partitionMetadata.length),
    first_leader: topics.length ? topics[0].partitionMetadata[0].leader : null,
  }
  process.stdout.write(JSON.stringify({ seconds, count, bytes: body.length, summary }) + '\n')
}

main().catch(e => {
  process.stderr.write(String(e) + '\n')
  process.exit(1)
})
