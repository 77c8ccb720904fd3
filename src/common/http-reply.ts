/** An answer exactly as sent: status, body bytes and headers. */
export interface HttpReply {
  status: number;
  body: string;
  headers: Record<string, string>;
}
