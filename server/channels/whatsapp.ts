// WhatsApp Cloud API: POST {baseUrl}/{phoneNumberId}/messages with a Bearer token. Success is a 2xx
// answer carrying {"messages":[{"id"}]}; that id is the provider message id.
import { baseUrl, isAnswer, pick, postJson, setting } from "./http.js";
import type { OutboundTemplate, OutboundText, SendResult } from "./index.js";

export const GRAPH_DEFAULT_BASE_URL = "https://graph.facebook.com/v21.0";

export function whatsappBody(to: string, message: OutboundText | OutboundTemplate): Record<string, unknown> {
  const digits = to.replace(/\D/g, "");
  if (message.kind === "text")
    return { messaging_product: "whatsapp", to: digits, type: "text", text: { body: message.text } };
  const template: Record<string, unknown> = { name: message.name, language: { code: message.language } };
  if (message.variables.length)
    template.components = [{ type: "body", parameters: message.variables.map((text) => ({ type: "text", text })) }];
  return { messaging_product: "whatsapp", to: digits, type: "template", template };
}

export async function sendWhatsapp(
  config: unknown,
  to: string,
  message: OutboundText | OutboundTemplate,
  timeoutMs: number,
): Promise<SendResult> {
  const phoneNumberId = setting(config, "phoneNumberId");
  const accessToken = setting(config, "accessToken");
  if (!phoneNumberId || !accessToken) return { ok: false, reason: "missing credentials (phoneNumberId, accessToken)" };
  if (!/\d/.test(to)) return { ok: false, reason: "no recipient" };
  const answer = await postJson({
    url: `${baseUrl(config, GRAPH_DEFAULT_BASE_URL)}/${encodeURIComponent(phoneNumberId)}/messages`,
    headers: { Authorization: `Bearer ${accessToken}` },
    body: whatsappBody(to, message),
    timeoutMs,
  });
  if (!isAnswer(answer)) return answer;
  const id = pick(answer.json, "messages", 0, "id");
  return id ? { ok: true, providerMessageId: id } : { ok: false, reason: "provider answer without messages[0].id" };
}
