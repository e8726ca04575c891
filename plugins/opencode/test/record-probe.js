// Probe plugin used by record-fixtures.mjs: writes every hook call of the real OpenCode binary
// (input and output, as JSON, output after the call) to $CAIRN_PROBE_LOG. No imports.
import { appendFileSync } from "node:fs"

const LOG = process.env.CAIRN_PROBE_LOG
const safe = (v) => {
  try {
    return JSON.parse(JSON.stringify(v ?? null))
  } catch {
    return String(v)
  }
}
const log = (hook, input, output) => {
  if (!LOG) return
  try {
    appendFileSync(LOG, JSON.stringify({ t: Date.now(), hook, input: safe(input), output: safe(output) }) + "\n")
  } catch {}
}
const wrap = (name) => async (input, output) => log(name, input, output)

export default {
  id: "cairn-record-probe",
  server: async (ctx) => {
    log("init", {
      ctxKeys: Object.keys(ctx),
      directory: ctx.directory,
      worktree: ctx.worktree,
      project: ctx.project,
      clientKeys: Object.keys(ctx.client ?? {}),
      sessionKeys: Object.keys(ctx.client?.session ?? {}),
      summarizeSrc: String(ctx.client?.session?.summarize ?? "").slice(0, 600),
      appLogSrc: String(ctx.client?.app?.log ?? "").slice(0, 300),
      configGetSrc: String(ctx.client?.config?.get ?? "").slice(0, 300),
    }, null)
    // client calls during init deadlock under `opencode run` (the in-process server waits for
    // the plugins to load): ask from inside a hook instead, with a time limit
    const within = (p, ms) => Promise.race([p, new Promise((r) => setTimeout(() => r({ timedOut: ms }), ms))])
    let asked = false
    const askClient = async (sessionID) => {
      if (asked) return
      asked = true
      const t0 = Date.now()
      const r = await within(ctx.client.config.get().catch((e) => ({ threw: String(e) })), 3000)
      log("client.config.get", { ms: Date.now() - t0 }, { keys: Object.keys(r ?? {}), provider: r?.data?.provider, compaction: r?.data?.compaction, timedOut: r?.timedOut })
      const t1 = Date.now()
      const s = await within(ctx.client.session.get({ path: { id: sessionID } }).catch((e) => ({ threw: String(e) })), 3000)
      log("client.session.get", { ms: Date.now() - t1 }, { data: s?.data, timedOut: s?.timedOut, threw: s?.threw })
    }
    return {
      event: async ({ event }) => log("event", { event }, null),
      "chat.message": async (input, output) => {
        log("chat.message", input, output)
        await askClient(input.sessionID)
      },
      "chat.params": async (input, output) =>
        log("chat.params", { sessionID: input.sessionID, agent: input.agent, modelKeys: Object.keys(input.model ?? {}), model: { id: input.model?.id, providerID: input.model?.providerID, limit: input.model?.limit } }, output),
      "experimental.chat.system.transform": wrap("experimental.chat.system.transform"),
      "experimental.chat.messages.transform": async (input, output) =>
        log("experimental.chat.messages.transform", input, { n: output.messages.length, messages: output.messages.slice(-3) }),
      "experimental.session.compacting": wrap("experimental.session.compacting"),
      "experimental.compaction.autocontinue": wrap("experimental.compaction.autocontinue"),
      "experimental.text.complete": wrap("experimental.text.complete"),
      "tool.execute.before": wrap("tool.execute.before"),
      "tool.execute.after": wrap("tool.execute.after"),
      tool: {
        probe_compact: {
          description: "Probe: schedules client.session.summarize for this session",
          args: {},
          async execute(args, context) {
            log("tool:probe_compact", { args, ctxKeys: Object.keys(context), sessionID: context.sessionID }, null)
            setTimeout(async () => {
              try {
                const r = await ctx.client.session.summarize({
                  path: { id: context.sessionID },
                  body: { providerID: "mock", modelID: "mock-model" },
                })
                log("summarize.result", null, { keys: Object.keys(r ?? {}), data: r?.data, error: r?.error })
              } catch (e) {
                log("summarize.result", null, { threw: String(e) })
              }
            }, 0)
            return "compaction scheduled"
          },
        },
      },
    }
  },
}
