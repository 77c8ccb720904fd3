import { DomainError, ErrorCode } from '../common/domain-error';

/**
 * The one check of a URL an endpoint is registered or updated with (the API
 * and client:create alike): an absolute http or https URL of at most 2048
 * characters, without credentials (they would be sent, logged and stored in
 * errors). Returns the URL as it will be stored and called. Asynchronous, as a
 * check that resolves the host is.
 */
export async function checkedWebhookUrl(candidate: string): Promise<string> {
  let url: URL | undefined;
  try {
    url = new URL(candidate);
  } catch {
    url = undefined;
  }
  if (!url || !['http:', 'https:'].includes(url.protocol) || url.href.length > 2048) {
    throw invalidUrl('url must be an absolute http or https URL of at most 2048 characters');
  }
  if (url.username !== '' || url.password !== '') throw invalidUrl('url must not carry credentials (user:password@)');
  return Promise.resolve(url.href);
}

function invalidUrl(message: string): DomainError {
  return new DomainError(ErrorCode.ParameterInvalid, message, { param: 'url' });
}
