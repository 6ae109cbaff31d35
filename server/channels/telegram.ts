// Telegram Bot API: POST {baseUrl}/bot{token}/sendMessage. Success is a 2xx answer with
// result.message_id.
import { baseUrl, isAnswer, pick, postJson, setting } from "./http.js";
import type { OutboundTemplate, OutboundText, SendResult } from "./index.js";

export const TELEGRAM_DEFAULT_BASE_URL = "https://api.telegram.org";

export async function sendTelegram(
  config: unknown,
  to: string,
  message: OutboundText | OutboundTemplate,
  timeoutMs: number,
): Promise<SendResult> {
  const token = setting(config, "token");
  if (!token) return { ok: false, reason: "missing credentials (token)" };
  if (message.kind !== "text") return { ok: false, reason: "templates are only sent on WhatsApp" };
  if (!to) return { ok: false, reason: "no recipient" };
  const answer = await postJson({
    url: `${baseUrl(config, TELEGRAM_DEFAULT_BASE_URL)}/bot${token}/sendMessage`,
    body: { chat_id: to, text: message.text },
    timeoutMs,
  });
  if (!isAnswer(answer)) return answer;
  const id = pick(answer.json, "result", "message_id");
  return id ? { ok: true, providerMessageId: id } : { ok: false, reason: "provider answer without result.message_id" };
}
