// The kafkajs column of Vltava's client compatibility matrix
// (daemon/acceptance TestCompatibilityMatrix). One run does one thing,
// described by the JSON object in argv[2]:
//
//   op          produce | txn | consume | group
//   brokers     ["host:port", ...]
//   topic       the topic
//   values      the record values to produce (produce, txn)
//   count       how many values to read (consume, group)
//   codec       none | gzip (kafkajs builds in no other codec)
//   idempotent  an idempotent producer (produce)
//   group       the consumer group (consume, group); "group" commits offsets
//   sasl        {mechanism: plain|scram-sha-256|scram-sha-512, username, password}
//   ssl         {ca, cert, key}: PEM file paths (cert and key optional)
//   timeoutMs   the whole run's bound
//
// It exits 0 after a success (printing the values read as a JSON array for
// consume and group), and non-zero with the error on stderr otherwise.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const spec = JSON.parse(process.argv[2])

const stderrLog = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

function client () {
  const cfg = {
    clientId: 'vltava-compat',
    brokers: spec.brokers,
    logLevel: logLevel.ERROR,
    logCreator: stderrLog,
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 }
  }
  if (spec.sasl) cfg.sasl = spec.sasl
  if (spec.ssl) {
    cfg.ssl = { ca: [fs.readFileSync(spec.ssl.ca, 'utf8')] }
    if (spec.ssl.cert) cfg.ssl.cert = fs.readFileSync(spec.ssl.cert, 'utf8')
    if (spec.ssl.key) cfg.ssl.key = fs.readFileSync(spec.ssl.key, 'utf8')
  }
  return new Kafka(cfg)
}

const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

async function produce (kafka) {
  const codec = codecs[spec.codec || 'none']
  if (codec === undefined) throw new Error(`codec ${spec.codec} is not built into kafkajs`)
  const producer = kafka.producer({
    idempotent: !!spec.idempotent,
    maxInFlightRequests: spec.idempotent ? 1 : undefined,
    allowAutoTopicCreation: true
  })
  await producer.connect()
  try {
    await producer.send({
      topic: spec.topic,
      acks: -1,
      compression: codec,
      messages: spec.values.map(v => ({ value: v }))
    })
  } finally {
    await producer.disconnect()
  }
}

async function txn (kafka) {
  const producer = kafka.producer({
    transactionalId: `compat-kafkajs-${spec.topic}`,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 10000,
    allowAutoTopicCreation: true
  })
  await producer.connect()
  try {
    const tx = await producer.transaction()
    try {
      await tx.send({ topic: spec.topic, messages: spec.values.map(v => ({ value: v })) })
      await tx.commit()
    } catch (e) {
      await tx.abort().catch(() => {})
      throw e
    }
  } finally {
    await producer.disconnect()
  }
}

async function consume (kafka, commit) {
  const consumer = kafka.consumer({
    groupId: spec.group,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200
  })
  await consumer.connect()
  const seen = []
  try {
    await consumer.subscribe({ topics: [spec.topic], fromBeginning: true })
    await new Promise((resolve, reject) => {
      consumer.on(consumer.events.CRASH, e => reject(e.payload.error))
      consumer.run({
        autoCommit: commit,
        eachMessage: async ({ message }) => {
          seen.push(message.value.toString())
          if (seen.length >= spec.count) resolve()
        }
      }).catch(reject)
    })
    if (commit) {
      // Committed on the way out at the latest; wait for it so the
      // caller can read the group's offsets.
      await consumer.stop()
    }
  } finally {
    await consumer.disconnect()
  }
  process.stdout.write(JSON.stringify(seen) + '\n')
}

async function main () {
  const kafka = client()
  switch (spec.op) {
    case 'produce': return produce(kafka)
    case 'txn': return txn(kafka)
    case 'consume': return consume(kafka, false)
    case 'group': return consume(kafka, true)
    default: throw new Error(`unknown op ${spec.op}`)
  }
}

const timer = setTimeout(() => {
  process.stderr.write(`timed out after ${spec.timeoutMs} ms\n`)
  process.exit(3)
}, spec.timeoutMs || 20000)

main().then(() => {
  clearTimeout(timer)
  process.exit(0)
}, e => {
  process.stderr.write(`${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
