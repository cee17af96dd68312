// The chart's dashboard, translated to a Perses dashboard by testbed/perses.py, drawn by
// Perses's own dashboard view and panel plugins against the Prometheus the dashboard names.
// The page reads ./dashboard.json, which testbed/perses.py writes beside the built page.
import React from 'react';
import { createRoot } from 'react-dom/client';
import { CssBaseline, ThemeProvider } from '@mui/material';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { QueryParamProvider } from 'use-query-params';
import { WindowHistoryAdapter } from 'use-query-params/adapters/window';
import { ChartsProvider, ErrorAlert, ErrorBoundary, SnackbarProvider, generateChartsTheme, getTheme } from '@perses-dev/components';
import { PluginRegistry, dynamicImportPluginLoader } from '@perses-dev/plugin-system';
import { ViewDashboard } from '@perses-dev/dashboards';
import * as prometheus from '@perses-dev/prometheus-plugin';
import * as timeseries from '@perses-dev/timeseries-chart-plugin';
import * as stat from '@perses-dev/stat-chart-plugin';
import * as table from '@perses-dev/table-plugin';

const pluginLoader = dynamicImportPluginLoader([
  { resource: prometheus.getPluginModule(), importPlugin: () => import('@perses-dev/prometheus-plugin') },
  { resource: timeseries.getPluginModule(), importPlugin: () => import('@perses-dev/timeseries-chart-plugin') },
  { resource: stat.getPluginModule(), importPlugin: () => import('@perses-dev/stat-chart-plugin') },
  { resource: table.getPluginModule(), importPlugin: () => import('@perses-dev/table-plugin') },
]);

// The dashboard carries its own datasource (spec.datasources); there is no Perses server to ask.
const datasourceApi = {
  buildProxyUrl: undefined,
  getDatasource: async () => undefined,
  getGlobalDatasource: async () => undefined,
  listDatasources: async () => [],
  listGlobalDatasources: async () => [],
};

const muiTheme = getTheme('light');
const chartsTheme = generateChartsTheme(muiTheme, {});
const queryClient = new QueryClient({ defaultOptions: { queries: { refetchOnWindowFocus: false, retry: 0 } } });

function Page({ dashboard }) {
  return (
    <ThemeProvider theme={muiTheme}>
      <CssBaseline />
      <ChartsProvider chartsTheme={chartsTheme}>
        <SnackbarProvider anchorOrigin={{ vertical: 'bottom', horizontal: 'right' }}>
          <QueryClientProvider client={queryClient}>
            <QueryParamProvider adapter={WindowHistoryAdapter}>
              <PluginRegistry pluginLoader={pluginLoader}>
                <ErrorBoundary FallbackComponent={ErrorAlert}>
                  <ViewDashboard
                    dashboardResource={dashboard}
                    datasourceApi={datasourceApi}
                    isReadonly={true}
                    isVariableEnabled={true}
                    isDatasourceEnabled={true}
                  />
                </ErrorBoundary>
              </PluginRegistry>
            </QueryParamProvider>
          </QueryClientProvider>
        </SnackbarProvider>
      </ChartsProvider>
    </ThemeProvider>
  );
}

fetch('./dashboard.json')
  .then((response) => response.json())
  .then((dashboard) => createRoot(document.getElementById('root')).render(<Page dashboard={dashboard} />));
