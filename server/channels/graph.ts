// Messenger and Instagram: the Graph Send API, POST {baseUrl}/me/messages?access_token=...
// Success is a 2xx answer with message_id.
import { baseUrl, isAnswer, pick, postJson, setting } from "./http.js";
import type { OutboundTemplate, OutboundText, SendResult } from "./index.js";
import { GRAPH_DEFAULT_BASE_URL } from "./whatsapp.js";

export async function sendGraph(
  config: unknown,
  to: string,
  message: OutboundText | OutboundTemplate,
  timeoutMs: number,
): Promise<SendResult> {
  const accessToken = setting(config, "accessToken");
  if (!accessToken) return { ok: false, reason: "missing credentials (accessToken)" };
  if (message.kind !== "text") return { ok: false, reason: "templates are only sent on WhatsApp" };
  if (!to) return { ok: false, reason: "no recipient" };
  const answer = await postJson({
    url: `${baseUrl(config, GRAPH_DEFAULT_BASE_URL)}/me/messages?access_token=${encodeURIComponent(accessToken)}`,
    body: { recipient: { id: to }, message: { text: message.text } },
    timeoutMs,
  });
  if (!isAnswer(answer)) return answer;
  const id = pick(answer.json, "message_id");
  return id ? { ok: true, providerMessageId: id } : { ok: false, reason: "provider answer without message_id" };
}
