import type { Provider } from '@nestjs/common';
import { SecretBox } from '../common/secret-box';
import { APP_CONFIG, type AppConfig } from '../config/app-config';

/** The endpoints' secrets are sealed and opened with the configured SECRETS_KEY (and SECRETS_KEY_PREVIOUS). */
export const secretBoxProvider: Provider = {
  provide: SecretBox,
  inject: [APP_CONFIG],
  useFactory: (config: AppConfig) => new SecretBox(config.secrets),
};
